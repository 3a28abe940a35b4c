"""algorithms/updates.py's DDP parts driven directly in a forked 2-rank gloo world (issue 52: its
mutation run at 8acd14b found them reached only by slow real runs): DeepSpeed's clipping arithmetic
averaged over the group when the ranks' norms differ, and at one rank with no process group at all;
whose BatchNorm statistics a forward leaves on each rank (the DDP option: each rank's own; a DDP
baseline: its first rank's, broadcast by DDP); a DDP rebuilt on a checkpoint's bucket layout keeping
each rank's parameters (post-local SGD's differ between groups)."""
from __future__ import annotations

import os

import torch
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.algorithms.updates import clip_as_deepspeed
from codist.workloads import build_workload

GROUP = {"parallel": {"world_size": 2}}   # one model, a group of 2 ranks


def _model(scale: float) -> torch.nn.Module:
    model = torch.nn.Linear(3, 2)
    for i, p in enumerate(model.parameters()):
        p.grad = scale * torch.arange(1.0, p.numel() + 1).view_as(p) / (i + 1)
    return model


def _norm(model) -> torch.Tensor:
    return torch.stack([p.grad.norm(2.0) for p in model.parameters()]).pow(2.0).sum().pow(0.5)


def _clipped(rank):
    import torch.distributed as dist
    model = _model(rank + 1.0)   # rank 1's gradients twice rank 0's: the norms differ
    before = [p.grad.clone() for p in model.parameters()]
    clip_as_deepspeed(model, 0.5, dist.group.WORLD, 2)
    return float(_norm(_model(rank + 1.0))), before, [p.grad for p in model.parameters()]


def test_the_clip_averages_the_groups_norms():
    got = forked_world.run(2, _clipped)
    mean = (got[0][0] + got[1][0]) / 2
    coef = 0.5 / (mean + 1e-6)
    assert coef < 1   # both ranks clip, each by the group's mean norm, not its own
    for _, before, after in got.values():
        assert all(torch.allclose(a, coef * b, rtol=1e-5) for a, b in zip(after, before))


def test_the_clip_at_one_rank_needs_no_process_group():
    model = _model(1.0)
    before = [p.grad.clone() for p in model.parameters()]
    clip_as_deepspeed(model, 0.5)   # a one-rank group (LocalUpdate): no collective, no group
    coef = 0.5 / (float(_norm(_model(1.0))) + 1e-6)
    assert all(torch.allclose(p.grad, coef * b, rtol=1e-5) for p, b in zip(model.parameters(), before))


def _buffers_and_relayout(rank):
    from codist.algorithms import TrainContext, build_algorithm
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), WORLD_SIZE="2")
    topo, out = topology(1), {}
    for name, extra in (("ddp option", {"parallel": {"grad_reduction": "ddp"}}),
                        ("powersgd", {"algorithm": {"name": "powersgd", "start_iter": 2}})):
        cfg = config.validate(deep_update(deep_update(TINY, GROUP), extra))
        algo = build_algorithm(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                            build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
        algo.setup()
        bn = [m for m in algo.model.modules() if isinstance(m, torch.nn.BatchNorm2d)][0]
        same = [p.detach().clone() for p in algo.model.parameters()]
        with torch.no_grad():
            bn.running_mean.fill_(float(rank))   # each rank's own, as after its own batches
            for p in algo.model.parameters():
                p.add_(rank)                     # each rank's own, as post-local SGD's groups
        params = [p.detach().clone() for p in algo.model.parameters()]
        algo.update.restore_buckets([list(range(len(params)))])   # a checkpoint's layout: one bucket
        kept = all(torch.equal(a, b) for a, b in zip(params, algo.model.parameters()))
        with torch.no_grad():
            for p, q in zip(algo.model.parameters(), same):
                p.copy_(q)                       # the same weights and input on both ranks again
        algo.model.train()
        algo.update.forward_module(torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
        out[name] = (algo.update.broadcasts_buffers, bn.running_mean.clone(), kept)
    return out


def test_whose_norm_statistics_a_forward_leaves_and_a_relayout_keeps_each_ranks_parameters():
    got = forked_world.run(2, _buffers_and_relayout)
    own, first = got[0]["ddp option"], got[0]["powersgd"]
    assert own[0] is False and not torch.equal(own[1], got[1]["ddp option"][1])    # each rank's own
    assert first[0] is True and torch.equal(first[1], got[1]["powersgd"][1])       # rank 0's, broadcast
    assert all(got[r][k][2] for r in (0, 1) for k in ("ddp option", "powersgd"))
