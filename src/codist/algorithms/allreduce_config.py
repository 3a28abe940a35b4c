"""`algorithm: allreduce` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from .registry import CommForm, register
from .sections import AlgorithmSection


class AllReduceConfig(AlgorithmSection):
    """Synchronous data parallel: one model, gradients all-reduced every step (DeepSpeed engine)."""
    name: Literal["allreduce"] = "allreduce"


register("allreduce", AllReduceConfig, "codist.algorithms.allreduce:AllReduce", label="all-reduce",
         # ring all-reduce of the gradients: 2(p-1)/p x the parameters per rank, every update
         comm=CommForm("allreduce_flat", lambda ranks, models: 2 * (ranks - 1) / ranks))
