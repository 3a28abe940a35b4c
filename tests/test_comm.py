"""The meter's byte formulas, on real gloo collectives between two processes."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codist.runtime.comm import CATEGORIES, CommMeter, ring_all_reduce_bytes, summarize


def test_ring_all_reduce_closed_form():
    assert ring_all_reduce_bytes(1000, 1) == 0
    assert ring_all_reduce_bytes(1000, 2) == 1000
    assert ring_all_reduce_bytes(1000, 4) == 1500
    assert ring_all_reduce_bytes(4096, 8) == 2 * 7 * 4096 // 8


def test_unknown_category_rejected():
    meter = CommMeter(rank=0, model_of=[0])
    with pytest.raises(ValueError, match="unknown communication category"):
        with meter.category("gossip"):
            pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # 4 ranks as 2 models x 2 ranks: groups {0,1} {2,3} inside models, {0,2} {1,3} across
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    cross = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    meter = CommMeter(rank, model_of=[0, 0, 1, 1])
    meter.install_hooks()
    t = torch.ones(250)  # 1000 bytes
    with meter.category("grad_allreduce"):
        meter.all_reduce(t, group=groups[rank // 2])
    with meter.category("param_exchange"):
        src = [0, 1][rank % 2]          # model 0's rank broadcasts to model 1's rank
        meter.broadcast(t, src=src, group=cross[rank % 2])
    meter.all_reduce(torch.ones(10), category="model_average")   # world, spans both models
    with meter.category("prediction_exchange"):                 # a plain torch.distributed call is seen too
        peer = rank ^ 2                                           # 0<->2, 1<->3: across models
        reqs = [dist.isend(torch.ones(5), peer), dist.irecv(torch.empty(5), peer)]
        for r in reqs:
            r.wait()
    ok = torch.equal(t, torch.full((250,), 2.0))                 # the collectives really ran
    out[rank] = (meter.as_tensor(), ok)
    dist.destroy_process_group()


def test_meter_counts_real_collectives_by_formula_and_tier():
    world = 4
    with mp.Manager() as manager:
        out = manager.dict()
        # forked, not spawned: the ranks need only what this process has imported (torch, codist.runtime.comm),
        # and spawning 4 interpreters cost ~3 s of CPU each for those imports; they touch only tiny
        # tensors and gloo, never an OpenMP region
        mp.start_processes(_worker, args=(world, _free_port(), out), nprocs=world, start_method="fork")
        results = dict(out)
    assert all(ok for _, ok in results.values())
    totals = sum(t for t, _ in results.values())
    s = summarize(totals, world_size=world, updates=1)["by_category"]
    # all-reduce of 1000 B over 2 ranks: each rank sends 2*(2-1)/2*1000 = 1000 B, within its model
    assert s["grad_allreduce"]["sent_bytes_all_ranks"] == 4 * 1000
    assert s["grad_allreduce"]["between_group_sent_bytes"] == 0
    # broadcast between models: 2 roots send 1000 B to one receiver each; receivers get 1000 B
    assert s["param_exchange"]["sent_bytes_all_ranks"] == 2 * 1000
    assert s["param_exchange"]["recv_bytes_all_ranks"] == 2 * 1000
    assert s["param_exchange"]["between_group_sent_bytes"] == 2 * 1000
    # world all-reduce of 40 B over 4 ranks: 2*3/4*40 = 60 B per rank, between models
    assert s["model_average"]["sent_bytes_all_ranks"] == 4 * 60
    assert s["model_average"]["between_group_sent_bytes"] == 4 * 60
    # point-to-point: each rank sends 20 B and receives 20 B, between models
    assert s["prediction_exchange"]["sent_bytes_all_ranks"] == 4 * 20
    assert s["prediction_exchange"]["recv_bytes_all_ranks"] == 4 * 20
    assert s["prediction_exchange"]["between_group_sent_bytes"] == 4 * 20
    assert set(s) <= set(CATEGORIES)


@pytest.mark.slow
def test_meter_agrees_with_deepspeeds_comms_logger_on_a_two_rank_run(tmp_path, write_config):
    """A real 2-rank all-reduce run (torchrun, codist.rank.train) with DeepSpeed's own comms logger on
    (tests/ds_comms_logger_rank.py): every collective DeepSpeed's engine issued, the meter counted,
    with the same payloads; and no process group ran a collective the meter did not see."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from codist import config
    from codist.launching import launch
    from codist.launching.rundir import RunDir
    path = write_config({"parallel": {"world_size": 2}})
    out = tmp_path / "run"
    env = launch.launch_env(config.load(path), "cpu", threads=1)   # the launcher's: its ninja, DS_ACCELERATOR
    rank_script = Path(__file__).with_name("ds_comms_logger_rank.py")
    held = RunDir(out)   # as codist run does before its ranks start: the directory and its lock
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", str(_free_port()), str(rank_script), "--config", str(path),
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    held.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logged = [json.loads((out / f"ds_comms-rank{r}.json").read_text()) for r in (0, 1)]

    def calls_and_bytes(op):
        return (sum(n for rank in logged for n in rank.get(op, {}).values()),
                sum(int(size) * n for rank in logged for size, n in rank.get(op, {}).items()))
    comm = json.loads((out / "summary.json").read_text())["comm"]
    by = comm["by_category"]
    # the engine's gradient all-reduce: 2 ranks, so each sends 2(p-1)/p = 1x its payload
    calls, payload = calls_and_bytes("all_reduce")
    assert calls == by["grad_allreduce"]["calls_all_ranks"] == 2 * 6   # one bucket per update
    assert payload == by["grad_allreduce"]["sent_bytes_all_ranks"] > 0
    # the engine's parameter broadcast from rank 0 at setup: the root sends each payload once
    calls, payload = calls_and_bytes("broadcast")
    assert calls == by["setup"]["calls_all_ranks"] and payload / 2 == by["setup"]["sent_bytes_all_ranks"] > 0
    assert set(logged[0]) == {"all_reduce", "broadcast"}   # nothing else went through deepspeed.comm
    assert comm["unseen_collectives_all_ranks"] == 0 and "unseen" not in by


UNSEEN = """
import os, torch, torch.distributed as dist
from codist.runtime.comm import CommMeter, install_hooks, summarize
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="{port}")
install_hooks()
dist.init_process_group("gloo", rank=0, world_size=1)
meter = CommMeter(0, model_of=[0])
meter.install_hooks()
meter.all_reduce(torch.ones(4), category="eval")             # seen
dist.all_to_all_single(torch.zeros(2), torch.ones(2))       # no hook: the meter does not see it
dist.distributed_c10d._get_default_group().allreduce([torch.ones(3)]).wait()   # a process group's own method
print("unseen", meter.unseen_calls(), summarize(meter.as_tensor(), 1, 1)["unseen_collectives_all_ranks"])
dist.destroy_process_group()   # left to interpreter exit, gloo's teardown can abort (seen once under load)
"""

CACHED_FIRST = """
import os, datetime, deepspeed
from codist.runtime.comm import CommMeter
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="{port}", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)   # before the hooks
CommMeter(0, model_of=[0]).install_hooks()
"""


def _python(code: str):
    import subprocess
    import sys
    # DeepSpeed's op build folder and ninja: conftest's op_build_env, in os.environ for the session
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", code.format(port=_free_port())], capture_output=True, text=True,
                          timeout=300, env=env)


def test_collectives_the_meter_did_not_see_are_flagged():
    """Each gloo group numbers its collectives; what the meter did not count shows as unseen."""
    proc = _python(UNSEEN)
    assert proc.returncode == 0, proc.stderr
    assert "unseen 2 2" in proc.stdout, proc.stdout + proc.stderr
    assert "the communication meter did not see 2 collective call(s)" in proc.stderr


def test_a_meter_after_deepspeed_cached_its_collectives_is_refused():
    proc = _python(CACHED_FIRST)
    assert proc.returncode != 0
    assert "deepspeed.init_distributed ran before the communication meter's hooks" in proc.stderr, proc.stderr


def test_a_category_of_calls_that_move_no_bytes_is_still_listed():
    """A barrier sends and receives nothing but is a collective the ranks waited on: its category is in
    summary.json with its calls; a category with neither bytes nor calls is left out (issue 52: the
    survivor that read the received bytes where the calls belong)."""
    totals = torch.zeros(len(CATEGORIES), 2, 3, dtype=torch.float64)
    totals[CATEGORIES.index("control"), 0, 2] = 3   # 3 barriers (control) within groups, 0 bytes either way
    s = summarize(totals, world_size=2, updates=1)["by_category"]
    assert list(s) == ["control"] and s["control"]["calls_all_ranks"] == 3 and s["control"]["sent_bytes_all_ranks"] == 0
