"""The normalisation statistics a model's saved file holds, lent to its ranks for an evaluation.

A model trained by several ranks has one set of weights but, in BatchNorm's running mean and
variance, each rank's own statistics: they follow the rank's own batches. The saved model
(`rank.train.finish`) holds the group's: `Algorithm.sync_norm_statistics` (the group's mean on a
DeepSpeed engine group or `parallel.grad_reduction: ddp`'s; nothing on a DDP baseline's group, whose
first rank's copy is the one written), then
the group's first rank writes the file. `as_saved` makes every rank of the group evaluate exactly
those statistics, through the same `sync_norm_statistics` and then the first rank's copy, and gives
each rank its own back afterwards, so training goes on as if nobody had looked. A model of one rank,
or one without BatchNorm, is left alone: no copy and no collective, so such runs are bit-identical.
"""
from __future__ import annotations

import contextlib

import torch

from ..algorithms.state import norm_statistics


@torch.no_grad()
def _to_saved(algo, stats: list, category: str) -> None:
    """Set this rank's norm statistics `stats` (a group of several ranks, with BatchNorm) to what its
    model's saved file holds: the save path's `sync_norm_statistics`, then the group's first rank's
    copy (a broadcast: after the engine's mean it changes nothing; a DDP baseline's ranks each keep
    their own, and its first rank's is written)."""
    topo = algo.topo
    algo.sync_norm_statistics(category)
    flat = torch.cat([t.reshape(-1) for t in stats])
    algo.meter.broadcast(flat, src=topo.model_index * topo.ranks_per_model, group=topo.dp_group, category=category)
    offset = 0
    for t in stats:
        t.copy_(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()


@contextlib.contextmanager
def as_saved(algo, category: str = "eval"):
    """Within: this rank's model has the norm statistics of its saved file (`_to_saved`); after: its
    own again, exactly. A group of one rank, or a model without BatchNorm: nothing happens."""
    stats = norm_statistics(algo.model)
    if algo.topo.ranks_per_model == 1 or not stats:
        yield
        return
    own = [t.clone() for t in stats]
    _to_saved(algo, stats, category)
    try:
        yield
    finally:
        with torch.no_grad():
            for t, mine in zip(norm_statistics(algo.model), own):
                t.copy_(mine)
