"""`algorithm: allreduce` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from .registry import register
from .sections import AlgorithmSection


class AllReduceConfig(AlgorithmSection):
    """Synchronous data parallel: one model, gradients all-reduced every step (DeepSpeed engine)."""
    name: Literal["allreduce"] = "allreduce"


register("allreduce", AllReduceConfig, "codist.algorithms.allreduce:AllReduce")
