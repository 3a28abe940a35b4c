"""`algorithm: model_average` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from .registry import CommForm, register
from .sections import AlgorithmSection


class ModelAverageConfig(AlgorithmSection):
    """MA-DNN / local SGD: K = parallel.models workers; parameters averaged after every tau-th update."""
    name: Literal["model_average"] = "model_average"
    tau: StrictInt = Field(16, ge=1, description="updates between averaging rounds")
    average_buffers: bool = Field(True, description="also average buffers (BatchNorm running statistics)")
    average_optimizer_state: bool = Field(False, description="also average momentum / Adam moments")
    data: Literal["disjoint", "shuffled"] = Field("disjoint", description="each worker's local data")


register("model_average", ModelAverageConfig, "codist.algorithms.model_average:ModelAverage", min_models=2,
         period="tau", extra_models=("G",), label="MA-DNN", knob=("H", "tau"),
         # every tau updates a ring all-reduce of the K states: 2(K-1)/K x the state per rank
         comm=CommForm("model_average", lambda ranks, models: 2 * (models - 1) / models))
