"""Training algorithms, by `algorithm.name`.

The classes (torch) are imported on first use, so that the plan can read the torch-free
`eval_models` table (which models a run evaluates) without importing torch.
"""
from __future__ import annotations

import importlib

# name -> "module:Class"
_CLASSES = {
    "allreduce": "allreduce:AllReduce",
    "codistill": "codistill:Codistill",
    "model_average": "model_average:ModelAverage",
    "ensemble_compress": "ensemble_compress:EnsembleCompress",
    "label_smoothing": "label_smoothing:LabelSmoothing",
    "ensemble": "ensemble:Ensemble",
    "powersgd": "ddp_baselines:PowerSGD",
    "post_local_sgd": "ddp_baselines:PostLocalSGD",
    "distill": "two_phase:TwoPhaseDistill",
}


def _load(spec: str):
    module, cls = spec.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def __getattr__(name: str):
    if name == "REGISTRY":
        return {k: _load(v) for k, v in _CLASSES.items()}
    if name in ("Algorithm", "TrainContext"):
        return _load(f"base:{name}")
    raise AttributeError(name)


def build_algorithm(ctx):
    return _load(_CLASSES[ctx.cfg.algorithm.name])(ctx)


__all__ = ["Algorithm", "TrainContext", "REGISTRY", "build_algorithm"]
