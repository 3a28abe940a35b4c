"""Which models a run evaluates, by algorithm (torch-free: the plan checks experiments files
against it): every local model "0".."n-1", plus the algorithm's extra models."""
from __future__ import annotations

# algorithm name -> the extra models its `extra_eval_names` reports (the classes read this too)
EXTRA = {"ensemble": ("ensemble",), "model_average": ("G",), "ensemble_compress": ("G",)}


def model_names(algorithm: str, models: int) -> list[str]:
    return [str(i) for i in range(models)] + list(EXTRA.get(algorithm, ()))
