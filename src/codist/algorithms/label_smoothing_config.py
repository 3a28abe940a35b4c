"""`algorithm: label_smoothing` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .registry import register
from .sections import AlgorithmSection


class LabelSmoothingConfig(AlgorithmSection):
    """One model, sync data parallel, loss = (1 - weight) * CE(y, f) + weight * CE(prior, f)."""
    name: Literal["label_smoothing"] = "label_smoothing"
    prior: Literal["uniform", "unigram"] = Field("uniform", description="unigram: training-set class frequencies")
    weight: float = Field(0.1, ge=0, le=1, description="weight of the prior in the target")


register("label_smoothing", LabelSmoothingConfig, "codist.algorithms.label_smoothing:LabelSmoothing",
         label="label smoothing")
