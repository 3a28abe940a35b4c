"""Training algorithms, by `algorithm.name`."""
from __future__ import annotations

from .allreduce import AllReduce
from .base import Algorithm, TrainContext

REGISTRY: dict[str, type[Algorithm]] = {
    "allreduce": AllReduce,
}


def build_algorithm(ctx: TrainContext) -> Algorithm:
    return REGISTRY[ctx.cfg.algorithm.name](ctx)


__all__ = ["Algorithm", "TrainContext", "REGISTRY", "build_algorithm"]
