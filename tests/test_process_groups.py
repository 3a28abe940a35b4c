"""The process groups of n models x m ranks on real gloo worlds (forked processes): how many
new_group calls a rank makes (issue 51, G3: O(world) before), that each group holds the right
ranks, and the two collective timeouts, the start-up's and the training's (issue 51)."""
import time

import pytest
import torch
import torch.distributed as dist

import forked_world
from codist import config
import deepspeed  # noqa: F401  (imported once, before the ranks fork: distributed.init uses it)


def _groups(rank, models):
    from codist.runtime import distributed
    calls = []
    real = dist.new_group

    def counting(*args, **kw):
        calls.append(args[0] if args else kw.get("ranks"))
        return real(*args, **kw)
    dist.new_group = counting
    try:
        topo = distributed.topology(models)
    finally:
        dist.new_group = real

    def total(group):
        x = torch.tensor([float(rank)])
        dist.all_reduce(x, group=group)
        return x.item()
    mpu = topo.mpu()
    return {"calls": len(calls), "dp": total(topo.dp_group), "cross": total(topo.cross_group),
            "single": total(mpu.get_model_parallel_group()),
            "dp_size": mpu.get_data_parallel_world_size(), "dp_rank": mpu.get_data_parallel_rank(),
            "dp_group_size": dist.get_world_size(mpu.get_data_parallel_group())}


def test_each_rank_makes_only_its_own_three_groups_on_a_world_of_8():
    """2 models x 4 ranks: each rank makes its model's group, its cross-model group and its own, by
    their members alone: 3 new_group calls, not models + m + world = 14 (which grows with the world:
    2,049 calls at 1,024 ranks, each an eager world-wide NCCL split once the default group was bound)."""
    world, models, m = 8, 2, 4
    got = forked_world.run(world, _groups, models)
    for rank, g in got.items():
        model, local = divmod(rank, m)
        assert g["calls"] == 3 <= models + m, (rank, g)
        assert g["dp"] == sum(range(model * m, (model + 1) * m)), (rank, g)
        assert g["cross"] == sum(i * m + local for i in range(models)), (rank, g)
        assert g["single"] == rank and (g["dp_size"], g["dp_rank"], g["dp_group_size"]) == (m, local, m)


def test_groups_of_one_model_and_of_one_rank_per_model():
    """The edge geometries, where two of a rank's groups hold the same ranks (models = 1: its cross
    group is itself; m = 1: its model's group is itself)."""
    for models in (1, 4):
        m = 4 // models
        for rank, g in forked_world.run(4, _groups, models).items():
            assert g["calls"] == 3 and g["single"] == rank, (models, rank, g)
            assert g["dp"] == sum(range(rank // m * m, (rank // m + 1) * m)), (models, rank, g)


# ---------------------------------------------------------------- the two timeouts

def _timeouts(rank, port, start_s, train_s, out):
    """A rank as codist.rank.train starts one: env:// variables, then distributed.init."""
    import os

    from codist.runtime import distributed
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        topo = distributed.init(1, "gloo", timeout_s=start_s)
        # start-up: a peer 3 s late (a checkpoint read, a slow data set-up) is waited for
        if rank == 1:
            time.sleep(3)
        t0 = time.monotonic()
        dist.barrier()
        waited = time.monotonic() - t0
        distributed.set_timeout(topo, train_s)
        # training: a collective a peer never joins fails after train_s, on the world's group and
        # on the model's group
        failed = {}
        if rank == 0:
            for name, group in (("world", None), ("dp", topo.dp_group)):
                t0 = time.monotonic()
                try:
                    dist.all_reduce(torch.ones(1), group=group)
                    failed[name] = None
                except RuntimeError:
                    failed[name] = time.monotonic() - t0
        else:
            time.sleep(4 * train_s + 2)   # alive (rank 0 is the store's host, but stay a peer) meanwhile
        out[rank] = ("ok", {"waited": waited, "failed": failed})
    except BaseException:
        import traceback
        out[rank] = ("failed", traceback.format_exc())


def test_start_up_and_training_have_their_own_collective_timeouts():
    """A gloo world of 2 joined by distributed.init with a start-up timeout of 60 s: a barrier a
    peer reaches 3 s late passes; after set_timeout(2 s), an all-reduce the peer never joins fails
    after ~2 s on the world's group and on the model's group (not after 60 s)."""
    import torch.multiprocessing as mp

    from codist.launching.launch import free_port
    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_timeouts, args=(free_port(), 60, 2, out), nprocs=2, start_method="fork")
        got = dict(out)
    for rank, (status, value) in sorted(got.items()):
        assert status == "ok", f"rank {rank}: {value}"
    waited, failed = got[0][1]["waited"], got[0][1]["failed"]
    assert waited > 2 and got[1][1]["waited"] < 1, got
    assert set(failed) == {"world", "dp"}, got
    for name, seconds in failed.items():
        assert seconds is not None and 1.5 < seconds < 20, (name, got)


def test_the_config_has_both_timeouts_and_set_up_and_main_use_them():
    """launch.start_timeout_s (30 min by default: rendezvous, groups, data, engines, a checkpoint
    read at 1,024 ranks) and launch.collective_timeout_s (10 min); the rank passes the first to
    distributed.init and the second to set_timeout once resumed, before the first update."""
    import ast
    import inspect

    from codist.rank import train
    cfg = config.validate({})
    assert (cfg.launch.start_timeout_s, cfg.launch.collective_timeout_s) == (1800, 600)
    with pytest.raises(config.ConfigError, match="launch.start_timeout_s"):
        config.validate({"launch": {"start_timeout_s": 1}})

    def calls(fn, name):
        return [n for n in ast.walk(ast.parse(inspect.getsource(fn)))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]
    (init,) = calls(train.set_up, "init")
    assert [ast.unparse(k.value) for k in init.keywords if k.arg == "timeout_s"] == ["cfg.launch.start_timeout_s"]
    (after,) = calls(train.main, "set_timeout")
    assert ast.unparse(after.args[1]) == "run.cfg.launch.collective_timeout_s"
    body = ast.unparse(ast.parse(inspect.getsource(train.main)))
    assert body.index("resume(run)") < body.index("set_timeout(") < body.index("train_loop(run)")
