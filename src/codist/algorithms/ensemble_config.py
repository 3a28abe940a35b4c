"""`algorithm: ensemble` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from .registry import register
from .sections import AlgorithmSection


class EnsembleConfig(AlgorithmSection):
    """n = parallel.models independently trained models; their outputs are averaged at evaluation."""
    name: Literal["ensemble"] = "ensemble"
    data: Literal["disjoint", "same", "shuffled"] = "shuffled"


register("ensemble", EnsembleConfig, "codist.algorithms.ensemble:Ensemble", min_models=2,
         extra_models=("ensemble",))
