"""The slurm profile's stop signal and its retries, without a scheduler: what Snakemake resolves from
env/profiles/slurm, the sbatch line snakemake-executor-plugin-slurm renders from it (the plugin's own
code), and a real Snakemake run showing that a diverged run (exit 4) is not trained again on retry.
(tests/test_slurm.py runs signals and resubmission on a live scheduler.)"""
from __future__ import annotations

import subprocess

import pytest

from codist import config
from codist.launching.cluster import job_resources
from test_cluster import sbatch_line
from test_workflow import BASE, ROOT, SNAKEMAKE, figure, toy_paper

RESOLVE = """
from snakemake.cli import parse_args
_, a = parse_args(["--profile", "env/profiles/slurm"])
print(a.retries, a.set_resources["train"]["slurm_extra"].evaluate(None, None, 1, threads=1, rulename="train",
                                                                  async_run=None).value)
"""


def test_train_jobs_get_sigusr1_before_their_time_limit():
    out = subprocess.run([str(SNAKEMAKE.with_name("python")), "-c", RESOLVE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    retries, extra = out.stdout.strip().splitlines()[-1].split()
    assert retries == "2" and extra == "--signal=USR1@300"
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra
    from test_cluster import Job
    res = {**job_resources(config.validate({"parallel": {"world_size": 16}, "launch": {"device": "cuda"}})),
           "slurm_extra": extra}
    validate_slurm_extra(Job(res))   # not an option the plugin reserves for itself
    assert sbatch_line(res)[-3:] == ["--cpus-per-task=8", "--signal=USR1@300", "--gres=gpu:8"]


@pytest.mark.slow   # Snakemake's start-up and a real run, twice: ~25 s
def test_a_diverged_run_is_not_retrained_by_a_retry(tmp_path):
    # lr 1e30 (finite, so valid): the first update blows the weights up; codist run exits 4
    base = {**BASE, "workload": {"name": "cifar", "train_size": 64, "val_size": 32, "width": 4},
            "optimizer": {"lr": 1.0e30, "momentum": 0.0}, "train": {"steps": 10, "batch_per_rank": 8,
                                                                      "eval_every": 2}}
    reps = toy_paper(tmp_path / "reps", {"figA": figure({"one": {}}, base=base)})
    proc = subprocess.run([str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path / "w"),
                           "--config", f"replications={reps}", "-c1", "--retries", "1", "--",
                           "results/embedded/toy/figA.csv"], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    run = next((tmp_path / "w/results/embedded/runs").iterdir())
    assert (run / ".diverged").exists()
    log = (tmp_path / f"w/results/embedded/logs/train/{run.name}.log").read_text()
    assert "this run diverged on an earlier attempt (exit 4); not retried" in log, text[-3000:]
    assert "if [ 2 -gt 1 ]" in text, text[-3000:]   # it was the retry (attempt 2) that stopped
