"""`algorithm: powersgd` and `algorithm: post_local_sgd`, the torch DDP baselines (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from .registry import CommForm, register
from .sections import AlgorithmSection


class PowerSGDConfig(AlgorithmSection):
    """Sync data parallel with PowerSGD-compressed gradients (Vogels et al. 2019), through torch DDP's
    powerSGD_hook: vanilla all-reduce for the first `start_iter` updates, then rank-`rank` factors."""
    name: Literal["powersgd"] = "powersgd"
    rank: StrictInt = Field(1, ge=1, description="matrix approximation rank")
    start_iter: StrictInt = Field(10, ge=2, description="updates of plain all-reduce first (torch requires > 1)")
    min_compression_rate: float = Field(2.0, gt=0)
    error_feedback: bool = True
    warm_start: bool = True


class PostLocalSGDConfig(AlgorithmSection):
    """Post-local SGD (Lin et al. 2020) through torch's post_localSGD_hook and PeriodicModelAverager:
    global sync SGD for `warmup_steps`, then gradients all-reduced only inside each of the
    parallel.models groups, and parameters averaged over all ranks every `tau` updates."""
    name: Literal["post_local_sgd"] = "post_local_sgd"
    tau: StrictInt = Field(4, ge=1, description="updates between global parameter averages")
    warmup_steps: StrictInt = Field(10, ge=0, description="updates of global sync SGD before local SGD starts")
    data: Literal["disjoint", "shuffled"] = "disjoint"


register("powersgd", PowerSGDConfig, "codist.algorithms.ddp_baselines:PowerSGD", label="PowerSGD",
         knob=("rank", "rank"), comm=CommForm("allreduce_flat"))   # all-reduce of its compressed factors
register("post_local_sgd", PostLocalSGDConfig, "codist.algorithms.ddp_baselines:PostLocalSGD", min_models=2,
         period="tau", label="post-local SGD", knob=("H", "tau"))
