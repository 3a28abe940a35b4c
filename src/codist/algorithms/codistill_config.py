"""`algorithm: codistill` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, model_validator

from .registry import CommForm, register
from .sections import DistillTerm


class CodistillConfig(DistillTerm):
    """n models (parallel.models >= 2), each all-reducing its own gradients; the teachers are the others.

    loss_i = CE(y, f_i) + alpha_t * D(mean_{j in teachers(i)} softmax(f_j / T), f_i), from step `burn_in` on.
    """
    name: Literal["codistill"] = "codistill"
    alpha: float = Field(1.0, ge=0, description="weight of the distillation term")
    alpha_ramp_steps: StrictInt = Field(0, ge=0, description="alpha rises linearly over this many steps after burn_in")
    burn_in: StrictInt = Field(0, ge=0, description="steps of plain training before distillation starts")
    exchange: Literal["checkpoint", "predictions"] = Field(
        "checkpoint", description="checkpoint: every exchange_every steps the models' states go to the other "
        "groups and teachers run locally on those stale copies (the papers' method); predictions: every step "
        "the models exchange their outputs on a shared batch")
    exchange_every: StrictInt = Field(50, ge=1, description="k: steps between checkpoint exchanges")
    data: Literal["disjoint", "same", "shuffled"] = Field(
        "disjoint", description="disjoint: each model trains on its own partition of the training set; "
        "same: every model sees the same batches; shuffled: the whole set in a different order per model")
    topology: Literal["all", "ring"] = Field("all", description="all: learn from the mean of all others; "
                                             "ring: model i learns from model i-1")

    @model_validator(mode="after")
    def _predictions_share_batches(self):
        if self.exchange == "predictions" and self.data != "same":
            raise ValueError(f"algorithm.data={self.data!r} with algorithm.exchange='predictions': exchanged "
                             f"predictions are on a shared batch; allowed: algorithm.data='same'")
        return self


def extra_forwards(cfg) -> float:
    """Checkpoint exchange: each rank runs its teachers on its batch once burn-in has passed."""
    a, steps = cfg.algorithm, cfg.train.steps
    if a.exchange != "checkpoint":
        return 0.0
    teachers = cfg.parallel.models - 1 if a.topology == "all" else 1
    return teachers * max(0, steps - a.burn_in) / steps


register("codistill", CodistillConfig, "codist.algorithms.codistill:Codistill", min_models=2,
         period="exchange_every", extra_forwards=extra_forwards, knob=("k", "exchange_every"),
         # every k updates each model's state to the n-1 others, between the model groups
         comm=CommForm("codistill", lambda ranks, models: models - 1,
                       column="between_group_sent_bytes_per_rank_per_update"))
