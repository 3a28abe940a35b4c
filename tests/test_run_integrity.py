"""Runs that cannot be mixed up (issue 26 item 2), against real `codist run` processes: a run
whose directory or metrics.jsonl is removed or replaced while it trains stops without a summary,
in one line; summary.json records metrics.jsonl (rows, last step, SHA-256), and aggregation
refuses metrics that are not the ones a run finished with, naming the file."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, TINY, deep_update, launch_run, read_rows, start_cli_run

sys.path.insert(0, str(ROOT / "analysis"))
import aggregate  # noqa: E402

LONG = deep_update(TINY, {"train": {"steps": 4000, "eval_every": 2}})   # never reaches its end here


def wait_for_rows(run: Path, proc, n: int = 1, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = run / "metrics.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    raise AssertionError(f"no {n} rows in {run} after {timeout} s")


def stopped(proc, timeout: float = 120) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except Exception:
        proc.kill()
        raise
    return proc.returncode, out


def test_removed_metrics_stop_the_run_without_a_summary(tmp_path):
    """What Snakemake does to a live orphan's outputs before rerunning its job: the run must not
    start a new metrics.jsonl holding only its later rows, nor write a summary."""
    run = tmp_path / "run"
    proc = start_cli_run(LONG, tmp_path, run)
    wait_for_rows(run, proc, 2)
    (run / "metrics.jsonl").unlink()
    rc, out = stopped(proc)
    assert rc == 1, out
    assert f"{run / 'metrics.jsonl'} was removed while this run was writing it" in out, out
    assert not (run / "metrics.jsonl").exists() and not (run / "summary.json").exists(), out


@pytest.mark.parametrize("eval_every", [2, 4000], ids=["at-an-evaluation", "at-the-stop-check"])
def test_a_replaced_directory_gets_nothing_more(tmp_path, eval_every):
    """The directory moved away and a new one made at its path (another run's, say): the run writes
    no metrics, checkpoint or summary into either. Without evaluations to log, the ranks notice it
    at their stop-signal agreement (every 10 updates) and stop there together, or at the next
    checkpoint's write if that comes first."""
    run, moved = tmp_path / "run", tmp_path / "moved"
    cfg = deep_update(LONG, {"train": {"eval_every": eval_every, "checkpoint_every": 10}})
    proc = start_cli_run(cfg, tmp_path, run)
    if eval_every == 2:
        wait_for_rows(run, proc, 2)
    else:
        deadline = time.monotonic() + 120
        while not (run / "checkpoint" / "latest.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint"
            time.sleep(0.05)
    run.rename(moved)
    run.mkdir()
    rc, out = stopped(proc)
    assert rc == 1, out
    assert f"{run} was replaced while this run was writing to it" in out, out
    assert f"could not record how they ended: the run directory {run} was removed or replaced" in out, out
    assert "never started" not in out, out   # what codist run's closing line said before
    if eval_every != 2:   # the stop-signal agreement, or the next checkpoint's write if it comes first (a quiet
        # machine can run the 10 updates to it between two polls of latest.json: seen in make test, once caught
        # by the write's own check before it wrote, once by its rename into the moved directory)
        assert any(why in out for why in ("stopped after update", "stopped before writing group-",
                                          "a write failed (cannot rename into place")), out
    assert not {p.name for p in run.iterdir()} & {"metrics.jsonl", "summary.json", "checkpoint", "manifest.json"}
    assert not (moved / "summary.json").exists()


def run_cli(cfg: dict, tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "cli.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300)


def runs_json(tmp_path: Path, run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    return {"runs": [{"series": "s", "seed": 0, "run_id": summary["run_id"], "run_dir": str(run)}]}


def test_summary_records_the_metrics_and_aggregation_checks_them(tmp_path):
    run = launch_run(tmp_path / "run", {"train": {"steps": 6, "eval_every": 2}})
    data = (run / "metrics.jsonl").read_bytes()
    rows = read_rows(run)
    assert json.loads((run / "summary.json").read_text())["metrics"] == {
        "rows": 3, "last_step": 6, "sha256": hashlib.sha256(data).hexdigest()}
    assert [r["step"] for r in rows] == [2, 4, 6]
    manifest = runs_json(tmp_path, run)
    table, curves = aggregate.aggregate(manifest)
    assert len(curves) == 3 and table["final_metric"].tolist() == [rows[-1]["val_accuracy"]]

    good = data
    (run / "metrics.jsonl").write_bytes(b"".join(good.splitlines(keepends=True)[1:]))   # a truncated curve
    with pytest.raises(ValueError, match=rf"^{run / 'metrics.jsonl'}: not the metrics its run finished with: "
                                         r"rows 2 \(summary: 3\), sha256 "):
        aggregate.aggregate(manifest)

    (run / "metrics.jsonl").write_bytes(good.replace(b'"step": 6', b'"step": 8'))   # same rows, other numbers
    with pytest.raises(ValueError, match=r"last_step 8 \(summary: 6\), sha256 "):
        aggregate.aggregate(manifest)

    (run / "metrics.jsonl").write_bytes(good[:-5])   # a cut last line: the file and line, before the record
    with pytest.raises(ValueError, match=rf"^{run / 'metrics.jsonl'}:3: not a JSON metrics row"):
        aggregate.aggregate(manifest)

    (run / "metrics.jsonl").write_bytes(good)
    summary = json.loads((run / "summary.json").read_text())
    del summary["metrics"]
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=rf"^{run / 'summary.json'} records no metrics"):
        aggregate.aggregate(manifest)


def test_a_run_directory_inside_another_is_refused_before_anything_is_deleted(tmp_path):
    """`--out A/logs/B` or `A/.ranks/B`: A's next start (or --fresh) would delete B. Refused in one
    line both ways: B inside the run directory A, and A over a B made there first."""
    a = launch_run(tmp_path / "A", {})
    b = a / "logs" / "B"
    result = run_cli(TINY, tmp_path, b)
    assert result.returncode == 2 and not b.exists(), result.stderr
    assert result.stderr.strip() == (f"codist: --out {b}: inside the run directory {a} (it has .codist.lock), "
                                     f"whose runs delete what it holds; put the run beside it, not inside it")

    other = tmp_path / "other"
    shutil.move(str(a / "summary.json"), tmp_path / "summary.json")   # A unfinished: its start clears .ranks
    launch_run(other, {"seed": 1})
    b = a / ".ranks" / "B"
    b.parent.mkdir(exist_ok=True)
    shutil.move(str(other), b)   # a run directory that got there first
    result = run_cli(TINY, tmp_path, a, "--fresh")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"codist: --out {a}: holds another run's directory ({b}), which this run "
                                     f"would delete; use another --out")
    assert (b / "summary.json").exists() and (a / "metrics.jsonl").exists()


@pytest.fixture
def small_fs(tmp_path):
    """A real 16 MB tmpfs (root only), unmounted afterwards; `fill()` writes zeros until it is full."""
    mount = tmp_path / "fs"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()}): a full disk needs root")

    def fill():
        fd = os.open(mount / "fill", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as e:
            assert e.errno == 28
        finally:
            os.close(fd)
    try:
        yield mount, fill
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_each_write_on_a_full_disk_names_its_file_and_leaves_nothing_half_written(small_fs):
    import torch
    from codist.runlog import MetricsLog, WriteError, atomic_torch_save, atomic_write_json
    fs, fill = small_fs
    log = MetricsLog(fs / "run" / "metrics.jsonl")
    log.replace([])   # an empty file holds no page yet: the next row needs one
    atomic_write_json(fs / "run" / "summary.json", {"old": True})
    fill()
    nospace = "(ENOSPC: No space left on device)"
    with pytest.raises(WriteError) as e:
        atomic_torch_save({"w": torch.zeros(100_000)}, fs / "run" / "checkpoint" / "group-0.pt")
    assert str(e.value) == f"cannot write {fs / 'run/checkpoint/group-0.pt'} {nospace}"   # not torch's 'unexpected pos'
    with pytest.raises(WriteError) as e:
        atomic_write_json(fs / "run" / "summary.json", {"new": "x" * 10_000})
    assert str(e.value) == f"cannot write {fs / 'run/summary.json'} {nospace}"
    with pytest.raises(WriteError) as e:
        log.append({"step": 1, "model": "0", "text": "x" * 5000})
    assert str(e.value) == f"cannot append a row to {fs / 'run/metrics.jsonl'} {nospace}"
    assert json.loads((fs / "run" / "summary.json").read_text()) == {"old": True}   # the old file stays whole
    assert (fs / "run" / "metrics.jsonl").read_bytes() == b""
    assert not list(fs.rglob("*.tmp")) and not list((fs / "run" / "checkpoint").iterdir())


@pytest.mark.slow
def test_a_run_on_a_full_disk_stops_in_one_line_with_its_last_checkpoint_whole(tmp_path, small_fs):
    """A real `codist run` whose disk fills while it trains: one line naming the file, exit 1, no
    summary, no temporary file, and latest.json still names a complete checkpoint to resume from.
    Slow (30-35 s on 2 loaded cores): a real run until its first checkpoint, then the full disk."""
    fs, fill = small_fs
    run = fs / "run"
    proc = start_cli_run(deep_update(LONG, {"train": {"checkpoint_every": 4}}), tmp_path, run)
    deadline = time.monotonic() + 120
    while not (run / "checkpoint" / "latest.json").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint"
        time.sleep(0.05)
    fill()
    rc, out = stopped(proc)
    assert rc == 1, out
    assert re.search(rf"^codist: rank 0: cannot [a-zA-Z ]+ {run}/\S+ \(ENOSPC: No space left on "
                     rf"device\)$", out, re.M), out
    # codist run's closing line gives the disk as the reason, not a guess (it said "killed, or out of memory?")
    assert f"could not record how they ended: the file system holding {run} is full" in out, out
    assert "out of memory" not in out and "never started" not in out, out
    assert not (run / "summary.json").exists() and not list(run.rglob("*.tmp"))
    step = json.loads((run / "checkpoint" / "latest.json").read_text())["step"]
    assert {p.name for p in (run / "checkpoint" / f"step-{step}").iterdir()} == {"group-0.pt", "rank-0.pt",
                                                                                "rank-0.sha256.json"}


def test_the_workflow_owner_is_checked_by_pid_start_time_and_host(monkeypatch):
    """CODIST_JOB_OWNER as workflows/results_lock.py writes it: a live owner, a dead one (a child
    that exited), a reused pid (another start time) and another host's pid (an srun task on another
    node cannot see it: not gone)."""
    import platform
    from codist.owner import start_ticks
    from codist.rank.train import job_gone
    from workflows.results_lock import job_owner
    monkeypatch.setenv("CODIST_JOB_OWNER", job_owner()["CODIST_JOB_OWNER"])
    assert not job_gone()
    child = subprocess.Popen(["sleep", "60"])
    ticks = start_ticks(child.pid)
    child.kill()
    child.wait()
    monkeypatch.setenv("CODIST_JOB_OWNER", f"{platform.node()}:{child.pid}:{ticks}")
    assert job_gone()
    monkeypatch.setenv("CODIST_JOB_OWNER", f"{platform.node()}:{os.getpid()}:{start_ticks() + 1}")
    assert job_gone()
    monkeypatch.setenv("CODIST_JOB_OWNER", f"another-host:{child.pid}:{ticks}")
    assert not job_gone()
    monkeypatch.delenv("CODIST_JOB_OWNER")
    assert not job_gone()
