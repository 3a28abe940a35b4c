"""Snakemake and the runs it starts (issue 26 item 2), with real snakemake processes on a toy paper:
- kill -9 of snakemake during a train job, `snakemake --unlock`, rerun: the rerun deletes the job's
  outputs while the orphaned run still lives (held stopped here, so the rerun certainly meets it),
  waits for its directory lock; the orphan, its workflow gone and its metrics removed, stops
  without a summary; the rerun resumes from the checkpoint and the figure gets every row;
- two snakemake processes from different working directories on one results root: the second is
  refused in one line, the first finishes.
Slow (about a minute each here: three snakemake start-ups and a run)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from test_workflow import BASE, ROOT, SNAKEMAKE, figure, toy_paper

from codist.runlog import metrics_record

pytestmark = pytest.mark.slow

STEPS = 300
LONG = {**BASE, "workload": {"name": "cifar", "train_size": 256, "val_size": 64, "width": 8},
        "train": {"steps": STEPS, "batch_per_rank": 8, "eval_every": 5, "checkpoint_every": 10},
        "launch": {"device": "cpu", "launcher": "warm"}}


def start(workdir: Path, reps: Path, results: Path, *args: str) -> subprocess.Popen:
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "-c1", *args,
                             "--config", f"replications={reps}", f"results={results}"],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out


def wait(what, proc=None, timeout: float = 300, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, proc.communicate()[0]
        value = what()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what.__doc__ or what}")


def rows_of(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


@pytest.fixture
def toy(tmp_path):
    reps = toy_paper(tmp_path / "reps", {"figA": figure({"one": {}}, base=LONG)})
    return reps, tmp_path / "results"


def run_dir(results: Path, proc) -> Path:
    """The toy paper's one run directory, once the train job made it."""
    return wait(lambda: next((results / "embedded" / "runs").glob("*/"), None)
                if (results / "embedded" / "runs").is_dir() else None, proc)


def test_a_killed_workflow_leaves_no_run_that_its_rerun_can_collide_with(tmp_path, toy):
    reps, results = toy
    work = tmp_path / "work"
    first = start(work, reps, results, f"{results}/embedded/toy/figA_curves.csv")
    run = run_dir(results, first)
    wait(lambda: rows_of(run / "metrics.jsonl") >= 4 and (run / "checkpoint" / "latest.json").exists(), first)
    rank0 = json.loads((run / ".ranks" / "rank-0.json").read_text())["pid"]
    log = next((results / "embedded" / "logs" / "train").glob("*.log"))
    orphan_log = log.open()   # the orphan's output: Snakemake deletes the log before the rerun's job
    os.kill(rank0, signal.SIGSTOP)   # the orphan, alive, frozen until the rerun has deleted its outputs
    try:
        first.kill()   # kill -9 snakemake
        first.wait()
        assert subprocess.run([str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "--unlock", "--config",
                               f"replications={reps}", f"results={results}"], cwd=work, capture_output=True,
                              timeout=300).returncode == 0
        rerun = start(work, reps, results, f"{results}/embedded/toy/figA_curves.csv")
        wait(lambda: log.exists() and "waiting up to 600 s for it to stop" in log.read_text(), rerun)   # the rerun's codist run
        assert not (run / "metrics.jsonl").exists() and not (run / "summary.json").exists()   # Snakemake's deletion
    finally:
        os.kill(rank0, signal.SIGCONT)
    rc, out = finish(rerun)
    assert rc == 0, out
    text = orphan_log.read()
    assert ("the workflow that started this run is gone" in text
            or f"{run / 'metrics.jsonl'} was removed while this run was writing it" in text), text
    steps = [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]
    assert steps == list(range(5, STEPS + 1, 5)), text
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"] == metrics_record((run / "metrics.jsonl").read_bytes())
    assert summary["resumed_from_step"]   # the rerun continued from the orphan's checkpoint
    curves = pd.read_csv(results / "embedded" / "toy" / "figA_curves.csv")
    assert curves[curves.headline]["step"].tolist() == list(range(5, STEPS + 1, 5))


def test_two_workflows_on_one_results_root(tmp_path, toy):
    reps, results = toy
    target = f"{results}/embedded/toy/figA_curves.csv"
    first = start(tmp_path / "a", reps, results, target)
    run = run_dir(results, first)
    wait(lambda: rows_of(run / "metrics.jsonl") >= 2, first)
    # the first's run frozen while the second starts: under load the second's start-up took longer
    # than the rest of the first's run, which had then finished (rc 0, nothing to refuse)
    rank0 = json.loads((run / ".ranks" / "rank-0.json").read_text())["pid"]
    os.kill(rank0, signal.SIGSTOP)
    try:
        rc, out = finish(start(tmp_path / "b", reps, results, target))
    finally:
        os.kill(rank0, signal.SIGCONT)
    assert rc != 0
    line = f"results root {results} is in use by another snakemake (pid {first.pid} on "
    assert line in out and f"working directory {tmp_path / 'a'})" in out, out
    assert first.poll() is None   # the second touched nothing of the first's
    rc, out = finish(first)
    assert rc == 0, out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"] == metrics_record((run / "metrics.jsonl").read_bytes())
    assert summary["metrics"]["rows"] == STEPS // 5 and summary["resumed_from_step"] is None
