"""A run owns its directory and its processes (issue 17): one `codist run` per directory, a
finished run is not retrained by accident, another run's files are refused (or cleared with
--fresh), a stop signal's checkpoint resumes whatever checkpoint_every is, and on the default
DeepSpeed launcher a SIGTERM or the death of `codist run` reaches every rank."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import TINY, deep_update, wait_gone, read_rows, read_summary
from conftest import start_cli_run as start

from codist import config
from codist.exits import EXIT_PREEMPTED
from codist.launching.launchers import NAMED
from codist.launching.supervise import rank_reports
from codist.launching.rundir import RunDir

# the directory's ownership does not depend on the launcher: TINY's warm one (the signal test below
# names each launcher whose process tree it checks)
ONE = TINY
LONG = deep_update(TINY, {"train": {"steps": 100000, "eval_every": 1000}})


def cli(cfg: dict, tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / f"{out.name}-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300)


def wait_for_step(out: Path, proc, world: int, at_least: int, timeout=180) -> list[int]:
    """The ranks' pids once every rank reports >= at_least updates (heartbeats every 2 s)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        reports = rank_reports(out)
        if len(reports) == world and all(r.get("step", 0) >= at_least for r in reports.values()):
            return [reports[r]["pid"] for r in range(world)]
        assert proc.poll() is None, f"run ended early: {proc.stdout.read()[-2000:]}"
        time.sleep(0.05)
    raise AssertionError("the ranks made no progress in time")


def wait_for_rows(out: Path, proc, world: int, rows: int, timeout=180) -> list[int]:
    """The ranks' pids once metrics.jsonl holds `rows` rows: an evaluation every few updates is seen
    within 0.05 s, where wait_for_step waits for a heartbeat (every 2 s)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        reports, path = rank_reports(out), out / "metrics.jsonl"
        if len(reports) == world and path.exists() and len(path.read_text().splitlines()) >= rows:
            return [reports[r]["pid"] for r in range(world)]
        assert proc.poll() is None, f"run ended early: {proc.stdout.read()[-2000:]}"
        time.sleep(0.05)
    raise AssertionError(f"no {rows} rows in time")


def test_out_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("x")
    done = cli(ONE, tmp_path, tmp_path / "taken")
    assert done.returncode == 2 and "--out" in done.stderr and "is a file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_an_unfinished_runs_leftovers_are_cleared_before_it_starts(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"run_id": "abc"}))
    (out / "model_1.pt").write_bytes(b"old")   # an earlier attempt's model, no summary.json
    d = RunDir(out)
    try:
        d.prepare("abc", fresh=False)
    finally:
        d.close()
    assert not (out / "model_1.pt").exists() and (out / "manifest.json").exists()


def test_the_exit_code_of_a_signal_is_128_plus_n():
    assert NAMED["deepspeed"].exit_code(-signal.SIGKILL) == 137
    assert NAMED["deepspeed"].exit_code(256 - signal.SIGTERM) == 143   # the DeepSpeed launcher's -15
    assert NAMED["torchrun"].exit_code(3) == 3 and NAMED["torchrun"].exit_code(-signal.SIGTERM) == 143


@pytest.mark.slow
def test_a_second_run_on_the_same_directory_fails_at_once(tmp_path):
    out = tmp_path / "shared"
    first = start(LONG, tmp_path, out)
    wait_for_step(out, first, 1, 1)
    t0 = time.time()
    second = cli(ONE, tmp_path, out)
    assert second.returncode == 2 and time.time() - t0 < 60, second.stderr
    assert f"in use by another codist run (pid {first.pid})" in second.stderr, second.stderr
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == EXIT_PREEMPTED


@pytest.mark.slow
def test_a_finished_run_is_not_retrained_and_another_run_is_refused(tmp_path):
    out = tmp_path / "run"
    two = deep_update(ONE, {"parallel": {"world_size": 2, "models": 2},
                            "algorithm": {"name": "codistill", "exchange_every": 3}, "train": {"save_model": True}})
    assert cli(two, tmp_path, out).returncode == 0
    summary = (out / "summary.json").read_text()
    rows = read_rows(out)
    again = cli(two, tmp_path, out)
    assert again.returncode == 0 and "already finished" in again.stderr, again.stderr
    assert (out / "summary.json").read_text() == summary and read_rows(out) == rows
    other = cli(ONE, tmp_path, out)                         # another config: another run id
    assert other.returncode == 2 and "holds another run" in other.stderr, other.stderr
    assert (out / "summary.json").read_text() == summary   # nothing of the first run touched
    fresh = cli(ONE, tmp_path, out, "--fresh")
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert read_summary(out)["run_id"] == config.validate(ONE).run_id()
    assert not (out / "model_1.pt").exists()                # the first run's second model is gone
    assert [r["model"] for r in read_rows(out)] == ["0", "0"]


@pytest.mark.slow
def test_a_stop_signal_checkpoint_resumes_without_checkpoint_every(tmp_path):
    out = tmp_path / "run"
    # stopped at its second row (update 20, seen within 0.05 s, not at a heartbeat every 2 s): 400
    # updates leave a margin before the end, and a short resume (was 1,000 updates, ~980 resumed)
    cfg = deep_update(LONG, {"train": {"steps": 400, "eval_every": 10, "checkpoint_every": 0}})
    proc = start(cfg, tmp_path, out)
    wait_for_rows(out, proc, 1, 2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_PREEMPTED
    stopped = json.loads((out / "checkpoint" / "latest.json").read_text())["step"]
    rerun = cli(cfg, tmp_path, out)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert read_summary(out)["resumed_from_step"] == stopped > 0


# a row every 10 updates: the signal is sent at update 10, seen at once (not at the next heartbeat)
TWO_RANKS = deep_update(LONG, {"parallel": {"world_size": 2}, "train": {"checkpoint_every": 0, "eval_every": 10}})


@pytest.mark.slow
@pytest.mark.parametrize("launcher,how", [("deepspeed", "SIGTERM"), ("deepspeed", "SIGINT"), ("deepspeed", "kill -9"),
                                          ("torchrun", "kill -9"), ("fork", "kill -9"),
                                          ("deepspeed", "SIGTERM to every process"),
                                          ("torchrun", "SIGTERM to every process")])
def test_the_ranks_stop_with_codist_run(tmp_path, launcher, how):
    """SIGTERM / Ctrl-C to `codist run` reach every rank (checkpoint, exit 3, resumable); after
    kill -9 of `codist run` the ranks notice their owner is gone and stop the same way. SIGTERM to
    every process of the run at once, as a service manager stops one (`codist run`, and `kill -TERM
    -- -PGID` of every process group under it), still lets the ranks checkpoint before
    `codist run` says why it ended (the DeepSpeed launcher's runner dies of it at once; it exited
    143 blaming 'killed, or out of memory?'). (The DeepSpeed launcher passes no signal on;
    torchrun's SIGTERM and the fork and warm launchers' are tested in test_fault_tolerance,
    test_fork_launcher and test_warm_launcher.)"""
    out = tmp_path / "run"
    proc = start(deep_update(TWO_RANKS, {"launch": {"launcher": launcher}}), tmp_path, out)
    pids = wait_for_rows(out, proc, 2, 1)
    if how == "kill -9":
        proc.kill()
    elif how == "SIGTERM to every process":   # codist run, and every process group under it (the
        # DeepSpeed launcher's session holds its runner, launch and ranks; torchrun gives each rank its own)
        tree = psutil.Process(proc.pid).children(recursive=True)
        assert set(pids) <= {p.pid for p in tree}
        os.kill(proc.pid, signal.SIGTERM)
        for group in {os.getpgid(p.pid) for p in tree} - {os.getpgid(proc.pid)}:
            os.killpg(group, signal.SIGTERM)
        assert proc.wait(timeout=180) == EXIT_PREEMPTED, proc.stdout.read()[-3000:]
        said = proc.stdout.read()
        assert "preempted; checkpoint written" in said and "killed, or out of memory" not in said, said[-3000:]
    else:
        proc.send_signal(getattr(signal, how))
        assert proc.wait(timeout=120) == EXIT_PREEMPTED, proc.stdout.read()[-3000:]
    assert wait_gone(pids), "ranks still running after codist run ended"
    states = {r["state"] for r in rank_reports(out).values()}
    assert states == {"preempted"}, rank_reports(out)
    assert not (out / "summary.json").exists()
    assert json.loads((out / "checkpoint" / "latest.json").read_text())["step"] >= 10
    RunDir(out).close()   # the lock went with codist run: the directory is free again
