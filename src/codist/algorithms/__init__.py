"""Training algorithms, by `algorithm.name`."""
from __future__ import annotations

from .allreduce import AllReduce
from .base import Algorithm, TrainContext
from .codistill import Codistill
from .ddp_baselines import PostLocalSGD, PowerSGD
from .ensemble import Ensemble
from .ensemble_compress import EnsembleCompress
from .label_smoothing import LabelSmoothing
from .model_average import ModelAverage
from .two_phase import TwoPhaseDistill

REGISTRY: dict[str, type[Algorithm]] = {
    "allreduce": AllReduce,
    "codistill": Codistill,
    "model_average": ModelAverage,
    "ensemble_compress": EnsembleCompress,
    "label_smoothing": LabelSmoothing,
    "ensemble": Ensemble,
    "powersgd": PowerSGD,
    "post_local_sgd": PostLocalSGD,
    "distill": TwoPhaseDistill,
}


def build_algorithm(ctx: TrainContext) -> Algorithm:
    return REGISTRY[ctx.cfg.algorithm.name](ctx)


__all__ = ["Algorithm", "TrainContext", "REGISTRY", "build_algorithm"]
