"""`algorithm: diloco` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from .registry import CommForm, register
from .sections import AlgorithmSection


class DilocoConfig(AlgorithmSection):
    """DiLoCo (Douillard et al. 2023): K = parallel.models workers from one shared start each take
    `tau` (the paper's H) steps of the run's optimizer (the inner optimizer), then the
    pseudo-gradient start - current is averaged over the workers and an outer SGD step with
    Nesterov momentum moves the shared start; every worker continues from it. Outer lr 1 and
    momentum 0 is model averaging (model_average with the same tau)."""
    name: Literal["diloco"] = "diloco"
    tau: StrictInt = Field(500, ge=1, description="H: inner steps between outer steps")
    outer_lr: float = Field(0.7, gt=0, description="outer SGD learning rate (the paper's 0.7)")
    outer_momentum: float = Field(0.9, ge=0, lt=1, description="outer SGD momentum (the paper's 0.9)")
    outer_nesterov: bool = Field(True, description="Nesterov momentum in the outer step (as the paper)")
    average_buffers: bool = Field(True, description="also average buffers (BatchNorm running statistics) "
                                  "at each outer step (plain mean: buffers have no pseudo-gradient)")
    data: Literal["disjoint", "shuffled"] = Field("disjoint", description="each worker's local data")


register("diloco", DilocoConfig, "codist.algorithms.diloco:Diloco", min_models=2, period="tau",
         extra_models=("G",), label="DiLoCo", knob=("H", "tau"),
         comm=CommForm("model_average"))   # its pseudo-gradients all-reduced every H
