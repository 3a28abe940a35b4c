"""codist.rank.norm_stats on its own (issue 52: its multi-model path was caught only by the slow
geometry runs): `as_saved` in a forked gloo world of 2 models x 2 ranks, with and without the group's
mean, and left alone where there is nothing to agree on. test_evaluation_norm_stats.py checks the
same lending through real runs and their saved files."""
from types import SimpleNamespace

import pytest
import torch


def _lent(rank, port, out):
    """Each rank's statistics inside and after `as_saved`, in a world of 2 models x 2 ranks: once with the
    group's mean (the engine's path), once with no mean (a DDP baseline's group: its first rank's copy)."""
    from test_bn_sync import four_rank_codistillation

    from codist.algorithms.state import norm_statistics
    from codist.rank.norm_stats import as_saved
    algo, topo, meter = four_rank_codistillation(rank, port)

    def flat():
        return torch.cat([t.reshape(-1) for t in norm_statistics(algo.model)]).clone()
    got = {}
    for case in ("mean", "first"):
        if case == "first":
            algo.sync_norm_statistics = lambda category: None
        with torch.no_grad():   # this rank's own, different in every element and every tensor
            for i, t in enumerate(norm_statistics(algo.model)):
                t.copy_(rank + 10 * i + 0.001 * torch.arange(t.numel(), dtype=t.dtype).view_as(t))
        own = flat()
        calls = meter.counts[("eval", "within")].calls
        with as_saved(algo):
            inside = flat()
        got[case] = (own, inside, flat(), meter.counts[("eval", "within")].calls - calls)
    out[rank] = got


@pytest.mark.slow   # 4 processes: about 30 s of CPU
def test_each_group_of_several_ranks_evaluates_its_saved_statistics_and_gets_its_own_back():
    """rank.norm_stats in a multi-model world: ranks 0, 1 hold model 0 and 2, 3 model 1. Inside
    `as_saved` every rank of a group holds what the group's first rank writes (the group's mean, or
    without one the first rank's own: rank 0's or rank 2's, never another group's); after it, each
    rank's own exactly. One all-reduce and one broadcast counted as eval, or the broadcast alone."""
    import torch.multiprocessing as mp

    from codist.launching import launch
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_lent, args=(launch.free_port(), out), nprocs=4)
        got = dict(out)
    assert got[0]["mean"][0].numel() > 2   # more than one statistic, so the offsets are exercised
    for group in ((0, 1), (2, 3)):
        first = group[0]
        mean = (got[group[0]]["mean"][0] + got[group[1]]["mean"][0]) / 2
        for r in group:
            own, inside, after, calls = got[r]["mean"]
            assert torch.allclose(inside, mean, rtol=0, atol=1e-6) and torch.equal(after, own) and calls == 2
            own, inside, after, calls = got[r]["first"]
            assert torch.equal(inside, got[first]["first"][0]) and torch.equal(after, own) and calls == 1


def _no_collective(*args, **kwargs):
    raise AssertionError("a collective where none belongs")


def test_a_group_of_one_rank_or_a_model_without_batchnorm_is_left_alone():
    """as_saved lends nothing where there is nothing to agree on: no copy, no collective (such runs stay
    bit-identical to runs before the lending existed)."""
    from codist.rank.norm_stats import as_saved
    with_bn = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1), torch.nn.BatchNorm2d(1))
    without = torch.nn.Linear(2, 2)
    for model, ranks in ((with_bn, 1), (without, 2)):
        algo = SimpleNamespace(model=model, sync_norm_statistics=_no_collective,
                               topo=SimpleNamespace(ranks_per_model=ranks, model_index=0, dp_group=None),
                               meter=SimpleNamespace(broadcast=_no_collective, all_reduce=_no_collective))
        before = [t.clone() for t in model.state_dict().values()]
        with as_saved(algo):
            pass
        assert all(torch.equal(a, b) for a, b in zip(before, model.state_dict().values()))
