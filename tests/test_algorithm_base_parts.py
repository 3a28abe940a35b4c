"""The parts of `codist.algorithms.base.Algorithm` that a whole run cannot tell apart by its numbers,
pinned on their own: which update a model group gets, what the objective weighs, which groups
all-reduce their BatchNorm statistics (a group of one, or a DDP group that broadcasts its first
rank's buffers before every forward, moves nothing: an extra collective there would show in the
communication a run reports), and what a rank checkpoints apart from its group's file."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from codist.algorithms import base
from codist.algorithms.base import Algorithm


def _algorithm(ranks_per_model: int, **update) -> Algorithm:
    algo = Algorithm.__new__(Algorithm)   # the methods under test read only these attributes
    torch.manual_seed(0)
    algo.model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    with torch.no_grad():
        algo.model[1].running_mean.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        algo.model[1].running_var.copy_(torch.tensor([1.0, 1.0, 2.0, 2.0]))
    algo.topo = SimpleNamespace(ranks_per_model=ranks_per_model, dp_group="the model's group")
    algo.update = SimpleNamespace(**update)
    algo.meter = SimpleNamespace(calls=[])
    return algo


def _other_rank_adds(algo: Algorithm, other: torch.Tensor) -> None:
    """The meter's all_reduce as a sum with one other rank holding `other` (flat)."""
    def all_reduce(tensor, group=None, category=None):
        algo.meter.calls.append((group, category, tensor.numel()))
        tensor.add_(other)
    algo.meter.all_reduce = all_reduce


def test_the_objective_weighs_each_term_and_adds_no_extra_term_unweighted():
    algo = Algorithm.__new__(Algorithm)
    task, extra = torch.tensor(2.0), torch.tensor(3.0)
    assert algo.objective(task, w_task=0.5).item() == 1.0
    assert algo.objective(task, extra).item() == 2.0   # the extra term's default weight is 0
    assert algo.objective(task, extra, w_task=0.5, w_extra=2.0).item() == 7.0
    assert [t.item() for t in algo.split_losses(torch.tensor(7.0))] == [2.0, 3.0]


@pytest.mark.parametrize("ranks, update, calls", [
    (1, {}, 0),                            # a group of one rank: nothing to agree on
    (2, {"broadcasts_buffers": True}, 0),  # DDP broadcasts its first rank's buffers itself
    (1, {"broadcasts_buffers": True}, 0),
    (2, {}, 1),                            # the engine reduces gradients only: the group averages
], ids=["one-rank", "ddp-group", "one-rank-ddp", "engine-group"])
def test_only_a_group_whose_ranks_drift_all_reduces_its_norm_statistics(ranks, update, calls):
    algo = _algorithm(ranks, **update)
    _other_rank_adds(algo, torch.tensor([3.0, 2.0, 1.0, 0.0, 3.0, 3.0, 2.0, 2.0]))
    algo.sync_norm_statistics("param_exchange")
    assert algo.meter.calls == [("the model's group", "param_exchange", 8)] * calls
    bn = algo.model[1]
    mean, var = ([2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]) if calls else ([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0])
    assert (bn.running_mean.tolist(), bn.running_var.tolist()) == (mean, var)
    assert bn.num_batches_tracked.item() == 0   # counters kept


@pytest.mark.parametrize("ranks, reduction, built", [
    (1, "ddp", "LocalUpdate"), (1, "engine", "LocalUpdate"), (2, "ddp", "OverlapUpdate"), (2, "engine", "EngineUpdate")])
def test_each_group_gets_its_update(monkeypatch, ranks, reduction, built):
    for name in ("LocalUpdate", "OverlapUpdate", "EngineUpdate"):
        monkeypatch.setattr(base, name, lambda *args, _name=name: _name)   # the classes need a live group
    algo = _algorithm(ranks)
    algo.cfg = SimpleNamespace(parallel=SimpleNamespace(grad_reduction=reduction))
    assert algo.build_update(algo.model) == built


def test_a_rank_of_a_one_rank_group_checkpoints_nothing_apart_from_its_groups_file():
    assert _algorithm(1).rank_checkpoint_state() == {}
    algo = _algorithm(2)
    state = algo.rank_checkpoint_state()
    assert [t.tolist() for t in state["norm_statistics"]] == [[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0]]
    assert state["norm_statistics"][0] is not algo.model[1].running_mean   # a copy, not the live buffer
    assert state["extra_state"] == {"model": {}}
