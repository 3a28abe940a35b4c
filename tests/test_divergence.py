"""A run whose training loss becomes NaN or inf stops with a clear status (issue 17): exit code
EXIT_DIVERGED, "diverged at update N" in its rank report and on stderr, no summary.json and no
model files, never a normal-looking finished run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from codist.rank.train import EXIT_DIVERGED
from conftest import TINY, deep_update, one_rank_env


def _train_one_rank(run, extra: dict) -> subprocess.CompletedProcess:
    """codist.rank.train as the launcher starts it, on one rank (env:// rendezvous on a free port)."""
    env = one_rank_env(run, extra)
    return subprocess.run([sys.executable, "-m", "codist.rank.train", "--config", str(run / "config.yaml"),
                           "--out", str(run)], env=env, capture_output=True, text=True, timeout=300)


def test_nan_loss_stops_the_run_with_a_diverged_status(tmp_path):
    # lr 1e30 (finite, so the config is valid): the first update blows the weights up
    done = _train_one_rank(tmp_path, {"optimizer": {"lr": 1.0e30, "momentum": 0.0},
                                      "train": {"steps": 6, "eval_every": 3}})
    assert done.returncode == EXIT_DIVERGED, done.stderr[-3000:]
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("codist: diverged at update ")]
    assert line and "model 0" in line[0], done.stderr[-3000:]
    report = json.loads((tmp_path / ".ranks" / "rank-0.json").read_text())
    assert report["state"] == "diverged" and 1 <= report["step"] <= 3
    assert report["error"].startswith(f"diverged at update {report['step']}: ")
    assert not (tmp_path / "summary.json").exists() and not list(tmp_path.glob("model_*.pt"))
    # the rows written before are finite; no NaN row reaches metrics.jsonl
    assert "NaN" not in (tmp_path / "metrics.jsonl").read_text()


@pytest.mark.slow
def test_codist_run_reports_a_diverged_run_as_such(tmp_path):
    """Through `codist run` (two forked ranks): exit code EXIT_DIVERGED and the ranks' reason,
    not "run failed: launcher exit code N"."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, {
        "parallel": {"world_size": 2}, "optimizer": {"lr": 1.0e30, "momentum": 0.0},
        "train": {"steps": 6, "eval_every": 3}, "launch": {"launcher": "fork"}})))
    done = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_DIVERGED, done.stderr[-3000:]
    assert "codist: run: diverged at update " in done.stderr and "run failed" not in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "run" / "summary.json").exists()
