"""`launch.launcher: fork`: one process imports torch/deepspeed once and forks the ranks.
Same results as torchrun, preemption (exit code 3, checkpoint, resume), a dead rank, and the
configurations it refuses (cuda, several SLURM nodes)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TINY, comparable, deep_update, gone, launch_run, read_rows, read_summary, wait_for_checkpoint
from conftest import start_cli_run as start

from codist import config, rank_env
from codist.launching import launch
from codist.config import ConfigError
from codist.exits import EXIT_PREEMPTED
from codist.launching.launch import build_command, check_fits

TWO = {"parallel": {"world_size": 2}}

# long enough to be stopped mid-way; a checkpoint every 10 updates
LONG = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                          "algorithm": {"name": "codistill", "exchange_every": 7, "data": "disjoint"},
                          "train": {"steps": 60, "eval_every": 10, "checkpoint_every": 10},
                          "launch": {"launcher": "fork"}})


def test_fork_command(tmp_path):
    cfg = config.validate({**TWO, "launch": {"launcher": "fork"}})
    cmd = build_command(cfg, tmp_path / "c.yaml", tmp_path, 29500, env={})
    assert cmd == [sys.executable, "-m", "codist.launching.fork", "--nprocs", "2", "--master_port", "29500",
                   "--workload", "cifar", "--",
                   "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path)]


def test_fork_is_refused_for_cuda_before_launch(tmp_path, write_config):
    cfg = config.validate(deep_update(TINY, {"launch": {"launcher": "fork", "device": "cuda"}}))
    with pytest.raises(ConfigError, match=r"launch\.launcher='fork' with device cuda"):
        launch.run(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()      # nothing written, nothing started
    path = write_config({"launch": {"launcher": "fork", "device": "cuda"}})
    out = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(tmp_path / "cli")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "launch.launcher='fork' with device cuda" in out.stderr, out.stderr
    check_fits(config.validate({"launch": {"launcher": "torchrun"}}), "cpu")   # the others still pass


def test_fork_is_refused_across_slurm_nodes(tmp_path, monkeypatch):
    cfg = config.validate({**TWO, "launch": {"launcher": "fork"}})
    with pytest.raises(ConfigError, match=r"launch\.launcher='fork' across 2 nodes"):
        build_command(cfg, tmp_path / "c.yaml", tmp_path, 1, env={"SLURM_JOB_NODELIST": "n[1-2]"})
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    with pytest.raises(ConfigError, match=r"launch\.launcher='fork' across 2 nodes"):
        check_fits(cfg, "cpu")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n1")            # one node: fine
    check_fits(cfg, "cpu", cores=2)


@pytest.mark.slow
def test_fork_gives_the_same_rows_as_torchrun(tmp_path):
    port = launch.free_port()
    fork = launch_run(tmp_path / "fork", deep_update(TWO, {"launch": {"launcher": "fork", "master_port": port}}))
    # torchrun's environment, not the DeepSpeed launcher's LOCAL_SIZE: no 69 MB /dev/shm workspace per rank
    # that DeepSpeed never unlinks
    assert not list(Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"))
    torchrun = launch_run(tmp_path / "torchrun", deep_update(TWO, {"launch": {"launcher": "torchrun"}}))
    assert comparable(read_rows(fork)) == comparable(read_rows(torchrun))
    assert [r["step"] for r in read_rows(fork)] == [3, 6]
    manifest = json.loads((fork / "manifest.json").read_text())
    assert manifest["launcher"] == "fork" and manifest["world_size"] == 2
    assert read_summary(fork)["setup_s"] > 0
    assert sorted(json.loads(p.read_text())["state"] for p in (fork / ".ranks").glob("rank-*.json")) == ["done"] * 2


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["fork", "warm"])
def test_sigterm_to_a_fork_run_checkpoints_exits_3_and_resumes(tmp_path, warm_dir, launcher):
    out = tmp_path / "preempted"
    long = deep_update(LONG, {"launch": {"launcher": launcher}})
    proc = start(long, tmp_path, out)
    wait_for_checkpoint(out, proc, 10)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_PREEMPTED
    assert "preempted" in proc.stdout.read()
    assert not (out / "summary.json").exists()
    assert {json.loads(p.read_text())["state"] for p in (out / ".ranks").glob("rank-*.json")} == {"preempted"}
    stopped_at = json.loads((out / "checkpoint" / "latest.json").read_text())["step"]
    assert 10 <= stopped_at < 60
    rerun = start(long, tmp_path, out)
    assert rerun.wait(timeout=300) == 0, rerun.stdout.read()
    summary = read_summary(out)
    assert summary["resumed_from_step"] == stopped_at
    assert [r["step"] for r in read_rows(out) if r["model"] == "0"] == list(range(10, 61, 10))
    uninterrupted = launch_run(tmp_path / "whole", long, base={})
    assert comparable(read_rows(out)) == comparable(read_rows(uninterrupted))


@pytest.mark.slow
def test_a_dead_forked_rank_stops_the_others_and_is_named(tmp_path):
    out = tmp_path / "dead"
    proc = start(LONG, tmp_path, out)
    wait_for_checkpoint(out, proc, 10)
    pid = json.loads((out / ".ranks" / "rank-1.json").read_text())["pid"]
    t0 = time.time()
    os.kill(pid, signal.SIGKILL)
    rc = proc.wait(timeout=120)
    text = proc.stdout.read()
    assert rc not in (0, EXIT_PREEMPTED) and time.time() - t0 < 60, text[-2000:]
    assert "rank 1 (pid" in text and "rank 1 died" in text, text[-2000:]


def test_auto_device_is_cpu_without_a_gpu_driver(monkeypatch):
    """`codist run` does not import torch (~2 s) to learn that a machine without a GPU driver is CPU."""
    cfg = config.validate({})
    monkeypatch.setattr(rank_env, "GPU_DRIVER_NODES", ("/nonexistent/nvidiactl",))
    assert launch.resolve_device(cfg) == "cpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(rank_env, "GPU_DRIVER_NODES", ("/",))      # a driver, but no device visible
    assert launch.resolve_device(cfg) == "cpu"


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["fork", "torchrun"])
def test_the_hang_watchdog_kills_every_forked_rank(tmp_path, launcher):
    """A stopped rank blocks the other in its next collective; launch.hang_timeout_s later the whole
    tree (launcher and ranks, torchrun's each in a session of its own) is killed and the run fails,
    saying so."""
    out = tmp_path / "hung"
    proc = start(deep_update(LONG, {"train": {"steps": 5000}, "launch": {"hang_timeout_s": 5, "launcher": launcher}}),
                 tmp_path, out)
    wait_for_checkpoint(out, proc, 10)
    pids = [json.loads((out / ".ranks" / f"rank-{r}.json").read_text())["pid"] for r in range(2)]
    os.kill(pids[1], signal.SIGSTOP)
    rc = proc.wait(timeout=120)
    text = proc.stdout.read()
    assert rc == 1 and "no rank made progress for 5 s" in text, text[-2000:]
    deadline = time.time() + 10
    while not all(gone(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in pids)
