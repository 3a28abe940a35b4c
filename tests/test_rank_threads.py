"""Threads per rank: an srun task takes its own node's allocation (SLURM_CPUS_PER_TASK, else the
usable cores shared by the node's tasks), not what the launching host computed from its cores and
the world size; launch.threads_per_rank wins everywhere; a local launcher's rank keeps its value."""
import json
import os
import socket
import subprocess
import sys

from conftest import TINY, deep_update

from codist import config
from codist.rank_env import rank_threads, usable_cores

# the launching host (128 cores, world 16) exported 8 threads to every task
SUBMITTED = {"CODIST_THREADS_PER_RANK": "8", "OMP_NUM_THREADS": "8"}
TASK = {**SUBMITTED, "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0", "SLURM_PROCID": "9", "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "16"}


def test_an_srun_task_uses_its_nodes_allocation():
    assert rank_threads({**TASK, "SLURM_CPUS_PER_TASK": "6"}, None) == 6
    # no --cpus-per-task: the node's usable cores over its tasks (8 per node; "8(x2)" is SLURM's form)
    assert rank_threads({**TASK, "SLURM_STEP_TASKS_PER_NODE": "8(x2)"}, None, cores=48) == 6
    assert rank_threads({**TASK, "SLURM_STEP_TASKS_PER_NODE": "4,2"}, None, cores=2) == 1
    assert rank_threads({**TASK, "SLURM_STEP_TASKS_PER_NODE": "1"}, None) == usable_cores()


def test_configured_threads_and_local_ranks():
    assert rank_threads({**TASK, "SLURM_CPUS_PER_TASK": "6"}, 3) == 3
    assert rank_threads(SUBMITTED, None) == 8                    # a local launcher's rank: its value
    assert rank_threads({**SUBMITTED, "SLURM_JOB_ID": "42"}, None) == 8   # the batch script is no srun task
    assert rank_threads({}, None) == 1


def test_usable_cores_are_the_affinity():
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_a_real_srun_task_records_its_nodes_threads(tmp_path):
    """codist.rank.train started as an srun task would be (SLURM's variables, no RANK), with the 8
    threads the launching host exported but --cpus-per-task=1 on its node: it runs with 1."""
    cfg = config.validate(deep_update(TINY, {"train": {"steps": 2, "eval_every": 2}}), "test")
    config.dump(cfg, tmp_path / "config.yaml")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update({**TASK, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1", "SLURM_CPUS_PER_TASK": "1",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "CUDA_VISIBLE_DEVICES": ""})
    done = subprocess.run([sys.executable, "-m", "codist.rank.train", "--config", str(tmp_path / "config.yaml"),
                           "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "manifest.json").read_text())["threads_per_rank"] == 1
