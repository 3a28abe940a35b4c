"""Checkpoints, kill-and-resume, preemption, corrupt checkpoints and dead ranks (2 real ranks)."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml
from conftest import TINY, comparable, deep_update, launch_run, read_rows

from codist.rank import checkpoint
from codist import config
from codist.exits import EXIT_PREEMPTED
from codist.launching import launch

pytestmark = pytest.mark.slow

# long enough to be interrupted mid-way: ~2-4 s of training at 2 ranks; torchrun's process tree
# (a SIGKILL of the whole job, a dead rank)
RUN = deep_update(TINY, {
    "parallel": {"world_size": 2, "models": 2},
    "algorithm": {"name": "codistill", "exchange_every": 7, "data": "disjoint"},
    "train": {"steps": 60, "eval_every": 10, "checkpoint_every": 10},
    "launch": {"launcher": "torchrun"},
})
# the runs whose process tree is not under test (the uninterrupted reference, the reruns that resume,
# a run that fails on a corrupt checkpoint): the session's warm server, without torchrun's three
# imports of torch per start (a warm run's rows equal a cold start's: test_warm_launcher)
WARM = deep_update(RUN, {"launch": {"launcher": "warm"}})


def start(cfg_path: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "codist.cli", "run", str(cfg_path), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_checkpoint(out: Path, proc: subprocess.Popen, at_least: int, timeout=120) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = out / "checkpoint" / "latest.json"
        if path.exists():
            step = json.loads(path.read_text())["step"]
            if step >= at_least:
                return step
        assert proc.poll() is None, f"run ended before a checkpoint: {proc.stdout.read()}"
        time.sleep(0.02)
    raise AssertionError("no checkpoint in time")


def assert_same_run(a: Path, b: Path):
    assert comparable(read_rows(a)) == comparable(read_rows(b))
    for name in ("0", "1"):
        x = torch.load(a / f"model_{name}.pt", weights_only=True)
        y = torch.load(b / f"model_{name}.pt", weights_only=True)
        torch.testing.assert_close(x, y, rtol=0, atol=0)   # nested: an LM's carried state too
    sa, sb = (json.loads((d / "summary.json").read_text())["comm"] for d in (a, b))
    sa["by_category"].pop("control"), sb["by_category"].pop("control")   # barriers of the restart itself
    assert sa == sb


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return launch_run(tmp_path_factory.mktemp("ref") / "run", WARM, base={})


@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN))
    return path


@pytest.fixture
def warm_path(tmp_path):
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(WARM))
    return path


def test_sigkill_of_whole_job_then_rerun_equals_uninterrupted(reference, cfg_path, warm_path, tmp_path):
    out = tmp_path / "killed"
    proc = start(cfg_path, out)
    wait_for_checkpoint(out, proc, 10)
    tree = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
    for p in tree:
        p.kill()
    proc.wait()
    assert not (out / "summary.json").exists()          # nothing looks complete
    rerun = start(warm_path, out)
    assert rerun.wait(timeout=300) == 0, rerun.stdout.read()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 10
    assert_same_run(reference, out)


# the hidden state, not a process tree, is under test here: the warm launcher (its SIGTERM path is
# test_fork_launcher's)
LM_RUN = {**deep_update(RUN, {"optimizer": {"name": "adam", "lr": 0.003, "weight_decay": 0.0},
                              "launch": {"launcher": "warm"}}),
          "workload": {"name": "lm", "val_tokens": 4096}}


def test_lm_resume_equals_uninterrupted_with_carried_hidden_state(tmp_path):
    """The LM carries hidden state across batches, in students and teachers: both are in the checkpoint."""
    ref = launch_run(tmp_path / "ref", LM_RUN, base={})
    cfg_path = tmp_path / "lm.yaml"
    cfg_path.write_text(yaml.safe_dump(LM_RUN))
    out = tmp_path / "preempted"
    proc = start(cfg_path, out)
    wait_for_checkpoint(out, proc, 10)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_PREEMPTED
    rerun = start(cfg_path, out)
    assert rerun.wait(timeout=300) == 0, rerun.stdout.read()
    assert_same_run(ref, out)


def test_sigterm_checkpoints_and_exits_for_requeue(reference, cfg_path, warm_path, tmp_path):
    out = tmp_path / "preempted"
    proc = start(cfg_path, out)
    wait_for_checkpoint(out, proc, 10)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_PREEMPTED
    assert "preempted" in proc.stdout.read()
    assert not (out / "summary.json").exists()
    stopped_at = json.loads((out / "checkpoint" / "latest.json").read_text())["step"]
    assert stopped_at > 0
    rerun = start(warm_path, out)
    assert rerun.wait(timeout=300) == 0, rerun.stdout.read()
    assert_same_run(reference, out)


def test_corrupt_or_foreign_checkpoint_is_a_clear_error(reference, tmp_path):
    import shutil
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    cfg = config.validate(WARM)
    step = checkpoint.latest(out, cfg.run_id())
    group_file = out / "checkpoint" / f"step-{step}" / "group-0.pt"
    group_file.write_bytes(group_file.read_bytes()[:100])              # truncated
    with pytest.raises(checkpoint.CheckpointError, match="group-0.pt: corrupt checkpoint"):
        checkpoint.load(out, step, cfg.run_id(), rank=0, group=0)
    other = config.validate(deep_update(RUN, {"optimizer": {"lr": 0.01}}))
    with pytest.raises(checkpoint.CheckpointError, match=f"checkpoint of run {cfg.run_id()}"):
        checkpoint.latest(out, other.run_id())
    # and through the launcher: the file fails its sha256, so the run resumes from the checkpoint
    # before, saying which file failed, and ends as the uninterrupted run did
    (out / "summary.json").unlink()
    assert launch.run(cfg, out) == 0
    assert json.loads((out / "summary.json").read_text())["resumed_from_step"] == step - 10
    assert f"checkpoint at step {step} not used: {group_file}: sha256" in (out / "logs" / "rank0.log").read_text()
    assert_same_run(reference, out)
    # a whole file whose algorithm state lacks a key this codist reads (another version wrote it)
    (out / "summary.json").unlink(missing_ok=True)
    shutil.copytree(reference / "checkpoint", out / "checkpoint", dirs_exist_ok=True)
    state = torch.load(group_file, weights_only=True)
    del state["algorithm"]["scheduler"]
    torch.save(state, group_file)
    index = json.loads((out / "checkpoint" / "latest.json").read_text())   # its digest recorded as if written so
    index["checkpoints"][0]["sha256"]["group-0.pt"] = hashlib.sha256(group_file.read_bytes()).hexdigest()
    (out / "checkpoint" / "latest.json").write_text(json.dumps(index))
    assert launch.run(cfg, out) != 0
    error = json.loads((out / ".ranks" / "rank-0.json").read_text())["error"]
    assert f"{group_file}: its state has no 'scheduler' (written by another codist version?)" in error


def test_a_dead_rank_fails_the_run_in_bounded_time_naming_it(cfg_path, tmp_path):
    out = tmp_path / "dead"
    proc = start(cfg_path, out)
    wait_for_checkpoint(out, proc, 10)
    pid = json.loads((out / ".ranks" / "rank-1.json").read_text())["pid"]
    t0 = time.time()
    os.kill(pid, signal.SIGKILL)
    rc = proc.wait(timeout=120)
    text = proc.stdout.read()
    assert rc != 0 and time.time() - t0 < 90
    assert "rank 1" in text, text[-2000:]
