"""`algorithm: distill`, two-phase distillation (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .registry import register
from .sections import DistillTerm


class DistillConfig(DistillTerm):
    """Two-phase (offline) distillation (Anil et al. 2018, Sec. 3.4.1): one fresh model trained on
    CE(y, f) + alpha * D(mean of the teachers' softened predictions, f); the teachers are the saved
    models of a finished run (a sibling run directory), frozen."""
    name: Literal["distill"] = "distill"
    teacher_run: str = Field(pattern=r"^[0-9a-f]{12}$", description="run id of the teacher run (its directory "
                             "is next to this run's); in experiments files: '@<series>' of the same figure")
    teacher_models: list[str] = Field(["0", "1"], min_length=1, description="which model_<name>.pt of that run")
    alpha: float = Field(1.0, ge=0, description="weight of the distillation term")


register("distill", DistillConfig, "codist.algorithms.two_phase:TwoPhaseDistill", reads_run="teacher_run",
         extra_forwards=lambda cfg: float(len(cfg.algorithm.teacher_models)))   # every teacher, every batch
