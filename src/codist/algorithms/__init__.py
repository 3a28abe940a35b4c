"""Training algorithms, by `algorithm.name` (see `registry`: one registration per algorithm).

Importing this package is cheap (no torch): the strategy classes are imported on first use, so
that validating a config or planning runs needs no torch.
"""
from __future__ import annotations

from .registry import AlgorithmSpec, model_names, register, spec, specs


def build_algorithm(ctx):
    """The strategy object (a `base.Algorithm`) for the run config in `ctx`."""
    return spec(ctx.cfg.algorithm.name).strategy_class()(ctx)


def __getattr__(name: str):
    if name in ("Algorithm", "TrainContext"):   # torch: imported on first use
        from . import base
        return getattr(base, name)
    raise AttributeError(name)


__all__ = ["Algorithm", "AlgorithmSpec", "TrainContext", "build_algorithm", "model_names", "register", "spec",
           "specs"]
