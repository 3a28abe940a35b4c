"""Resume agreement (issue 28): rank 0 decides the step to resume from and broadcasts it; every rank
checks that the files it loads hold this run's id and that step, and fails with one line otherwise."""
import hashlib
import json
import shutil

import pytest
import torch
import torch.multiprocessing as mp
from conftest import TINY, comparable, deep_update, launch_run, read_rows

from codist.rank import checkpoint
from codist import config
from codist.launching import launch
from codist.runlog import atomic_torch_save, atomic_write_json

RUN_ID = "r1"


def view(root, latest_step: int):
    """A run directory as one node sees it: latest.json naming `latest_step`, the files of step 8."""
    for name in ("group-0.pt", "rank-0.pt", "rank-1.pt"):
        atomic_torch_save({"run_id": RUN_ID, "step": 8}, root / "checkpoint" / "step-8" / name)
    atomic_write_json(root / "checkpoint" / "latest.json", {"step": latest_step, "run_id": RUN_ID})
    return root


def _ranks(rank, port, views, out):
    import torch.distributed as dist

    from codist.runtime.comm import CommMeter
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    meter = CommMeter(rank, [0, 0])
    meter.install_hooks()
    # rank 1's node sees a stale latest.json (step 4: a shared filesystem's client cache); rank 0's decides
    step = checkpoint.agreed_step(views[rank], RUN_ID, rank, meter, torch.device("cpu"))
    checkpoint.load(views[rank], step, RUN_ID, rank, 0)   # the files hold that step
    out[rank] = step
    # rank 0 cannot read the index: every rank fails (rank 0 with its reason, the others naming rank 0)
    if rank == 0:
        (views[0] / "checkpoint" / "latest.json").write_text("{")
    dist.barrier()
    try:
        checkpoint.agreed_step(views[rank], RUN_ID, rank, meter, torch.device("cpu"))
    except checkpoint.CheckpointError as e:
        out[f"error{rank}"] = str(e)
    dist.barrier()   # both ranks are past the last broadcast before either tears down gloo (CI once saw
    dist.destroy_process_group()   # rank 0 abort in teardown: "terminate called without an active exception")


def test_every_rank_resumes_from_rank_0s_step(tmp_path):
    views = [view(tmp_path / "node0", 8), view(tmp_path / "node1", 4)]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_ranks, args=(launch.free_port(), views, out), nprocs=2)
        got = dict(out)
    assert got[0] == got[1] == 8
    assert "unreadable checkpoint index" in got["error0"]
    assert got["error1"] == f"{views[1] / 'checkpoint' / 'latest.json'}: rank 0 found no usable checkpoint in " \
                            f"its index (its log says why)"


RUN = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2}, "algorithm": {"name": "codistill", "exchange_every": 4},
                         "train": {"steps": 12, "eval_every": 4, "checkpoint_every": 8}})


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    return launch_run(tmp_path_factory.mktemp("agreement") / "ref", RUN, base={})


def unfinished_copy(ref, to):
    shutil.copytree(ref, to)
    (to / "summary.json").unlink()
    return to


def test_a_real_2_rank_run_resumes_from_rank_0s_step(ref, tmp_path):
    resumed = unfinished_copy(ref, tmp_path / "resumed")
    assert launch.run(config.validate(RUN), resumed) == 0
    assert json.loads((resumed / "summary.json").read_text())["resumed_from_step"] == 8
    assert comparable(read_rows(resumed)) == \
        comparable(read_rows(ref))


@pytest.mark.parametrize("field, value", [("step", 4), ("run_id", "another")])
def test_a_rank_whose_checkpoint_is_not_the_agreed_one_fails_with_one_line(ref, tmp_path, field, value):
    run_id = config.validate(RUN).run_id()
    bad = unfinished_copy(ref, tmp_path / "bad")
    path = bad / "checkpoint" / "step-8" / "rank-1.pt"
    atomic_torch_save({**torch.load(path, weights_only=True), field: value}, path)
    # rank 0's view of the file matches its digest (another node's copy may differ): rank 1's own check decides
    index = json.loads((bad / "checkpoint" / "latest.json").read_text())
    index["checkpoints"][0]["sha256"]["rank-1.pt"] = hashlib.sha256(path.read_bytes()).hexdigest()
    atomic_write_json(bad / "checkpoint" / "latest.json", index)
    assert launch.run(config.validate(RUN), bad) != 0
    error = json.loads((bad / ".ranks" / "rank-1.json").read_text())["error"]
    held = {"step": 8, "run_id": run_id, field: value}
    assert f"{path}: holds run {held['run_id']} step {held['step']}, expected run {run_id} step 8" in error
    assert "\n" not in error.strip()


LM_GROUP = {**deep_update(TINY, {"parallel": {"world_size": 2}, "optimizer": {"name": "adam", "lr": 0.003,
                                                                               "weight_decay": 0.0},
                                 "train": {"steps": 12, "eval_every": 4, "checkpoint_every": 8}}),
            "workload": {"name": "lm", "val_tokens": 4096}}


def test_a_resumed_lm_group_continues_with_each_ranks_own_carried_state(tmp_path):
    """An LM carries each row's hidden state across batches, and each rank of a group reads its own
    rows: a rank that resumed with its group's first rank's state would start its rows afresh."""
    ref = launch_run(tmp_path / "ref", LM_GROUP, base={})
    resumed = unfinished_copy(ref, tmp_path / "resumed")
    assert launch.run(config.validate(LM_GROUP), resumed) == 0
    assert comparable(read_rows(resumed)) == \
        comparable(read_rows(ref))
