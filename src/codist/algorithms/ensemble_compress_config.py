"""`algorithm: ensemble_compress` (pydantic only: no torch)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from .registry import CommForm, register
from .sections import DistillTerm


class EnsembleCompressConfig(DistillTerm):
    """EC-DNN: every tau updates the global model G is the equal-weight output ensemble of the K local
    models; with compress, each local model is distilled toward G during the next local phase:
    loss = (1 - distill_weight) * CE(y, f_i) + distill_weight * D(G, f_i). compress=false is E-DNN."""
    name: Literal["ensemble_compress"] = "ensemble_compress"
    tau: StrictInt = Field(4000, ge=1, description="updates between ensembling rounds")
    compress: bool = True
    distill_weight: float = Field(0.5, ge=0, le=1, description="weight of G's soft labels in the combined loss")
    data: Literal["disjoint", "shuffled"] = "disjoint"


def extra_forwards(cfg) -> float:
    """Compression: the K members (G) run on each batch from the first round on."""
    a, steps = cfg.algorithm, cfg.train.steps
    return cfg.parallel.models * max(0, steps - a.tau) / steps if a.compress else 0.0


register("ensemble_compress", EnsembleCompressConfig, "codist.algorithms.ensemble_compress:EnsembleCompress",
         min_models=2, period="tau", extra_models=("G",), extra_forwards=extra_forwards, label="EC-DNN",
         # every tau updates a ring all-gather of the K states: (K-1) x the state per rank
         knob=("tau", "tau"), comm=CommForm("ensemble_compress", lambda ranks, models: models - 1))
