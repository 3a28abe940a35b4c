"""What algorithm config classes share (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..workloads.schema import SECTION_CONFIG


class AlgorithmSection(BaseModel):
    """Base of every `algorithm:` config class; `name` is its registry key (a Literal)."""
    model_config = SECTION_CONFIG

    def model_data(self) -> str:
        """Which data each model trains on: the `data` field where the algorithm has one
        (disjoint, same, shuffled), else `same` (one model, or models that share batches)."""
        return self.data if "data" in type(self).model_fields else "same"


class DistillTerm(AlgorithmSection):
    """The distillation term's settings, shared by codistill, distill and ensemble_compress."""
    temperature: float = Field(1.0, gt=0, description="softmax temperature of both sides; the term is scaled by T^2")
    loss: Literal["kl", "soft_ce"] = Field("kl", description="KL(teacher||student) or cross-entropy to soft labels")
