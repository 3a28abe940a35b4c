"""The cluster path on a live SLURM scheduler (`make test-slurm` starts a throw-away two-node
cluster and sets SLURM_CONF; without one these tests are skipped). The jobs here ask for one
node; tests/test_slurm_two_nodes.py runs jobs across both.

Every job here goes through the real slurmctld/slurmd: sbatch with the geometry that
snakemake-executor-plugin-slurm renders from the run's job resources, `codist run` in the batch
script, the ranks as srun tasks, signals from scancel, SLURM's own time limit, resubmission, and
Snakemake with env/profiles/slurm. Results are compared with the same run trained locally.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TINY, comparable, deep_update, launch_run, read_rows

from codist import config
from codist.launching.cluster import job_resources


def cluster_up() -> bool:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).exists():
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not cluster_up(), reason="no SLURM cluster (make test-slurm starts one)")]

PY = sys.executable
PARTITION = os.environ.get("CODIST_SLURM_PARTITION", "test")

# 2 ranks, 2 codistilling models; ~10 s of training, a checkpoint every 10 updates
RUN = deep_update(TINY, {
    "name": "slurm",
    "parallel": {"world_size": 2, "models": 2},
    "algorithm": {"name": "codistill", "exchange_every": 7, "data": "disjoint"},
    "train": {"steps": 200, "eval_every": 20, "checkpoint_every": 10},
    "launch": {"device": "cpu", "time_limit_min": 10, "launcher": "torchrun"},   # ranks as srun tasks
})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same run trained on this machine without SLURM (torchrun)."""
    return launch_run(tmp_path_factory.mktemp("ref") / "run", RUN, base={})


# ---------------------------------------------------------------- helpers

def slurm(*args: str, timeout: float = 30, env: dict | None = None) -> str:
    out = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stderr.strip()}"
    return out.stdout


def sbatch_options(cfg: dict) -> list[str]:
    """The sbatch options snakemake-executor-plugin-slurm renders for this run's job resources."""
    from test_cluster import sbatch_line
    return sbatch_line(job_resources(config.validate(cfg), "cpu"), PARTITION)


def submit(tmp_path: Path, cfg: dict, out: Path, log: Path, env: dict | None = None) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # what the plugin's job step does for a job with an `mpi` resource: the command in the batch
    # script itself, with the allocation's task variables removed (it keeps SLURM_JOB_ID)
    script = ("#!/bin/bash\nfor v in $(compgen -e | grep -E '^(SLURM_|SRUN_|SBATCH_)'); do\n"
              "  case $v in SLURM_JOB_ID|SLURM_JOBID|SLURM_CLUSTER_NAME|SLURM_SUBMIT_DIR|SLURM_SUBMIT_HOST) ;;"
              " *) unset $v ;; esac\ndone\n"
              f"exec {PY} -m codist.cli run {path} --out {out}\n")
    (tmp_path / "job.sh").write_text(script)
    return slurm("sbatch", "--parsable", "--output", str(log), "-D", str(tmp_path), *sbatch_options(cfg),
                 str(tmp_path / "job.sh"), env=env).strip().split(";")[0]


def job_state(job: str) -> tuple[str, str]:
    text = slurm("scontrol", "show", "job", "-o", job)
    return re.search(r"JobState=(\S+)", text)[1], re.search(r"ExitCode=(\S+)", text)[1]


def wait_job(job: str, timeout: float = 240) -> tuple[str, str]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        state, code = job_state(job)
        if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED"):
            return state, code
        time.sleep(0.5)
    slurm("scancel", job)
    raise AssertionError(f"job {job} still {state} after {timeout} s")


def wait_checkpoint(out: Path, job: str, at_least: int = 20, timeout: float = 180) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = out / "checkpoint" / "latest.json"
        if path.exists() and json.loads(path.read_text())["step"] >= at_least:
            return json.loads(path.read_text())["step"]
        state, _ = job_state(job)
        assert state in ("PENDING", "RUNNING", "CONFIGURING"), f"job {job} ended ({state}) before a checkpoint"
        time.sleep(0.05)
    raise AssertionError("no checkpoint in time")


def wait_log(log: Path, text: str, timeout: float = 30) -> str:
    deadline = time.time() + timeout
    while text not in log.read_text() and time.time() < deadline:
        time.sleep(0.2)
    return log.read_text()


def resumed_from(out: Path):
    return json.loads((out / "manifest.json").read_text())["resumed_from_step"]


def srun_steps(job: str) -> list[str]:
    """The job steps the nodes' slurmd launched for this job, one entry per node a step ran on
    (their logs, log/slurmd-<node>.log: 'launch task StepId=J.S')."""
    logs = sorted((Path(os.environ["SLURM_CONF"]).parent / "log").glob("slurmd*.log"))
    return sorted(s for log in logs for s in re.findall(rf"launch task StepId={job}\.(\d+)", log.read_text()))


# ---------------------------------------------------------------- runs under sbatch

def test_two_rank_run_from_srun_tasks_equals_a_local_run(reference, tmp_path):
    out, log = tmp_path / "run", tmp_path / "job.log"
    assert sbatch_options(RUN)[-2:] == ["--ntasks-per-node=2", "--cpus-per-task=1"]
    job = submit(tmp_path, RUN, out, log)
    assert wait_job(job) == ("COMPLETED", "0:0"), log.read_text()[-3000:]
    assert srun_steps(job) == ["0"]   # one srun step: the two ranks
    assert comparable(read_rows(out)) == comparable(read_rows(reference))
    assert json.loads((out / "summary.json").read_text())["final_metric"] == \
        json.loads((reference / "summary.json").read_text())["final_metric"]


def test_warm_launcher_runs_in_one_task(reference, tmp_path):
    """A CPU run with the warm launcher (the embedded experiments') asks for one task with all its
    CPUs and forks its ranks there, from a warm server started inside the job."""
    warm = deep_update(RUN, {"launch": {"launcher": "warm"}})
    assert sbatch_options(warm)[-2:] == ["--ntasks=1", "--cpus-per-task=2"]
    out, log = tmp_path / "run", tmp_path / "job.log"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "CODIST_WARM_IDLE_S": "5"}
    job = submit(tmp_path, warm, out, log, env=env)
    assert wait_job(job) == ("COMPLETED", "0:0"), log.read_text()[-3000:]
    assert srun_steps(job) == []   # no job step: the ranks were forked in the batch script
    assert json.loads((out / "manifest.json").read_text())["launcher"] == "warm"
    assert comparable(read_rows(out)) == comparable(read_rows(reference))


def preempt_and_resubmit(tmp_path: Path, cfg: dict, out: Path) -> tuple[str, str]:
    """Submit `cfg`, SIGTERM its batch script after a checkpoint, check that it stopped there
    (exit 3, no summary), resubmit it and check that the new job resumed from that checkpoint
    and completed. Returns the two job ids."""
    log = tmp_path / "job.log"
    job = submit(tmp_path, cfg, out, log)
    wait_checkpoint(out, job)
    # SIGTERM to the batch script only (codist run): it reaches the ranks as SIGUSR1 through srun
    # (codist.launching.cluster.SrunLauncher.stop; srun answers SIGTERM itself by SIGKILLing the step). The figure test
    # below sends SIGUSR1 to the job's steps (the ranks) instead.
    slurm("scancel", "--batch", "--signal=TERM", job)
    assert wait_job(job) == ("FAILED", "3:0"), log.read_text()[-3000:]
    assert "preempted; checkpoint written" in log.read_text()
    stopped = json.loads((out / "checkpoint" / "latest.json").read_text())["step"]
    assert 0 < stopped < cfg["train"]["steps"] and not (out / "summary.json").exists()
    # resubmitted, as Snakemake's retries do (`scontrol requeue` of the same job id raced slurmd's
    # clean-up here: "Job N already killed, do not launch batch job"); it resumes from the checkpoint
    job2 = submit(tmp_path, cfg, out, tmp_path / "job2.log")
    assert wait_job(job2) == ("COMPLETED", "0:0"), (tmp_path / "job2.log").read_text()[-3000:]
    assert resumed_from(out) == stopped
    return job, job2


def test_preempted_job_checkpoints_exits_3_and_resumes_when_resubmitted(reference, tmp_path):
    out = tmp_path / "run"
    preempt_and_resubmit(tmp_path, RUN, out)
    assert comparable(read_rows(out)) == comparable(read_rows(reference))


def test_time_limit_is_reported_and_the_next_submission_resumes(tmp_path):
    """SLURM's own time limit: TimeLimit=0 on the running job makes slurmctld end it at its next
    time-limit check (within 30 s; limits are whole minutes, so a real 1-minute limit would cost a
    minute more): TIMEOUT, SIGTERM to every process, SIGKILL after KillWait. The ranks checkpoint
    and exit 3; the next submission resumes from that checkpoint and finishes."""
    # 4,000 updates (~60 s here): slurmctld's check may come 30 s after the first checkpoint, and a
    # 1,500-update run (24 s) sometimes finished first
    long = deep_update(RUN, {"train": {"steps": 4000, "eval_every": 100, "checkpoint_every": 20}})
    out, log = tmp_path / "run", tmp_path / "job.log"
    job = submit(tmp_path, long, out, log)
    wait_checkpoint(out, job)
    slurm("scontrol", "update", f"JobId={job}", "TimeLimit=0")
    state, _ = wait_job(job)
    assert state == "TIMEOUT", log.read_text()[-3000:]
    text = wait_log(log, "rerun the same command to resume")   # the job's processes end after its state
    assert f"JOB {job} ON" in text and "CANCELLED" in text and "DUE TO TIME LIMIT" in text, text[-3000:]
    assert "preempted; checkpoint written, rerun the same command to resume" in text, text[-3000:]
    assert not (out / "summary.json").exists()
    stopped = json.loads((out / "checkpoint" / "latest.json").read_text())["step"]
    assert 0 < stopped < 4000
    job2 = submit(tmp_path, long, out, tmp_path / "job2.log")
    assert wait_job(job2) == ("COMPLETED", "0:0"), (tmp_path / "job2.log").read_text()[-3000:]
    assert resumed_from(out) == stopped
    steps = [r["step"] for r in read_rows(out) if r["model"] == "0"]
    assert steps == list(range(100, 4001, 100)) or steps == [0, *range(100, 4001, 100)], steps


# ---------------------------------------------------------------- the workflow with the slurm profile

def test_figure_with_the_slurm_profile_survives_a_preemption(reference, tmp_path):
    """`snakemake --profile env/profiles/slurm` builds a toy figure: the train job is an sbatch job
    whose ranks are srun tasks; a USR1 mid-run makes it exit 3, Snakemake resubmits it (retries),
    it resumes, and its rows equal the same run trained locally (the reference: the same run id)."""
    reps = tmp_path / "reps"
    base = deep_update(RUN, {"train": {"steps": 200}})
    base.pop("name")
    doc = {"paper": "toy", "source": "a test", "figures": {"figA": {
        "title": "t", "source": "Fig. 0", "kind": "curves",
        "scales": {"embedded": {"base": base, "seeds": [0], "series": {"codistill": {}}}}}}}
    (reps / "toy").mkdir(parents=True)
    (reps / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    work = tmp_path / "work"
    work.mkdir()
    cmd = [str(Path(PY).with_name("snakemake")), "-s", str(ROOT / "Snakefile"), "--directory", str(work),
           "--profile", str(ROOT / "env/profiles/slurm"),
           "--config", f"replications={reps}", "results=results",
           # the test cluster's partition and sizes; quick status checks
           "--default-resources", f"slurm_partition={PARTITION}", "runtime=10", "mem_mb=1000", "cpus_per_task=1",
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
           "--latency-wait", "5", "--", "results/embedded/toy/figA.png"]
    snake = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        runs = work / "results" / "embedded" / "runs"
        deadline = time.time() + 180
        job = None
        while time.time() < deadline and job is None:
            assert snake.poll() is None, snake.stdout.read()[-4000:]
            ckpts = list(runs.glob("*/checkpoint/latest.json"))
            if ckpts and json.loads(ckpts[0].read_text())["step"] >= 20:
                jobs = slurm("squeue", "-h", "-o", "%i %k").split("\n")
                job = next(j.split()[0] for j in jobs if "rule_train" in j)
            time.sleep(0.05)
        assert job, "the train job made no checkpoint in time"
        slurm("scancel", "--signal=USR1", job)
        text, _ = snake.communicate(timeout=400)
    finally:
        if snake.poll() is None:
            snake.kill()
    assert snake.returncode == 0, text[-5000:]
    assert f"SLURM-job '{job}' failed" in text, text[-5000:]   # the plugin saw the preempted job fail
    assert (work / "results/embedded/toy/figA.png").stat().st_size > 0
    assert (work / "results/embedded/toy/figA.csv").exists()
    run_dir = next(runs.iterdir())
    assert srun_steps(job) == ["0"]
    assert resumed_from(run_dir) > 0   # the resubmitted job resumed from the preempted one's checkpoint
    assert run_dir.name == config.validate(RUN).run_id()   # the reference's run (ids leave out name, launch)
    assert comparable(read_rows(run_dir)) == comparable(read_rows(reference))
