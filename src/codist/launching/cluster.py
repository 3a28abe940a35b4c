"""SLURM: what a run's job asks for, and the srun tree that starts its ranks inside the job.

One rule decides how a run's ranks start under SLURM, and the job's resources follow it:

- **srun tasks** (`ranks_by_srun`): every multi-rank run on GPUs, and multi-rank CPU runs whose
  launcher does not fork (deepspeed, torchrun). The job asks for `nodes` x `tasks_per_node` (= ranks per
  node) tasks of `cpus_per_task` (= CPUs per rank) CPUs each, `gres: gpu:<ranks per node>`, and
  `mpi` (snakemake-executor-plugin-slurm then runs the job's command in the batch script itself,
  not inside an `srun -n1` step). `codist run` in that batch script starts the ranks with one
  `srun` (one task per rank, each seeing its node's GPUs and taking the one at its LOCAL_RANK;
  `srun_command`); each rank maps SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS to
  torch.distributed's RANK / LOCAL_RANK / WORLD_SIZE (codist.rank_env.srun_env).
  No nested srun (a `codist run` inside a job step never calls srun) and no ssh.
- **one task**: one-rank runs and the forking launchers (fork, warm: CPU only): the job asks for
  one task with all the run's CPUs, and `codist run` starts the ranks on its node as it would
  on any machine.
"""
from __future__ import annotations

import signal
import sys
from typing import Mapping

from ..config import ConfigError, RunConfig
from ..rank_env import job_port
from .launchers import Launcher, named

CPU_MEM_MB_PER_RANK = 2000             # a CPU rank's memory request (embedded workloads need < 1 GB)


# ------------------------------------------------------------------ job resources

def nodes_needed(cfg: RunConfig, device: str) -> int:
    """Nodes a run needs: world_size / gpus_per_node (rounded up) on GPUs, and on CPU when the
    ranks are srun tasks (gpus_per_node then reads as ranks per node: a CPU cluster, or the test
    cluster's two nodes, get the GPU runs' geometry); one for the other CPU runs."""
    if device != "cuda" and not ranks_by_srun(cfg, device):
        return 1
    return -(-cfg.parallel.world_size // cfg.launch.gpus_per_node)


def ranks_by_srun(cfg: RunConfig, device: str) -> bool:
    """Whether, under SLURM, the run's ranks are srun tasks (else one task starts them locally)."""
    if cfg.parallel.world_size == 1:
        return False
    return device == "cuda" or not named(cfg).forks


def job_resources(cfg: RunConfig, device: str = "cuda") -> dict:
    """The Snakemake resources of a run's SLURM job (the train rule passes them to
    snakemake-executor-plugin-slurm, which renders them into sbatch options):
    nodes -> --nodes, tasks_per_node -> --ntasks-per-node (ranks per node; srun runs only),
    cpus_per_task -> --cpus-per-task (CPUs per rank; for one-task runs: the whole run's),
    gres -> --gres=gpu:<ranks per node>, mem_mb -> --mem (per node), runtime -> -t (minutes),
    mpi: non-empty when the ranks are srun tasks (the plugin then renders the task geometry and
    runs the command in the batch script, where `codist run` calls srun once)."""
    world = cfg.parallel.world_size
    nodes = nodes_needed(cfg, device)
    if world % nodes:
        raise ConfigError(f"parallel.world_size={world} does not split evenly over {nodes} nodes of "
                          f"launch.gpus_per_node={cfg.launch.gpus_per_node} GPUs; use a multiple of {nodes}")
    per_node = world // nodes
    res = {"nodes": nodes, "runtime": cfg.launch.time_limit_min, "gres": "", "mpi": ""}
    if device == "cuda":
        res.update(tasks_per_node=per_node, cpus_per_task=cfg.launch.cpus_per_rank,
                   mem_mb=per_node * cfg.launch.mem_mb_per_rank, gres=f"gpu:{per_node}")
    elif ranks_by_srun(cfg, device):
        res.update(tasks_per_node=per_node, cpus_per_task=cfg.launch.threads_per_rank or 1,
                   mem_mb=per_node * CPU_MEM_MB_PER_RANK)
    else:   # one task: the launcher (or the lone rank) runs on the job's one node
        res.update(tasks_per_node=1, cpus_per_task=world * (cfg.launch.threads_per_rank or 1),
                   mem_mb=world * CPU_MEM_MB_PER_RANK)
    if ranks_by_srun(cfg, device):
        res["mpi"] = "srun"
    return res


# ------------------------------------------------------------------ the srun tree inside a job

def in_allocation(env: Mapping[str, str]) -> bool:
    """Inside a SLURM job's batch script (or salloc shell), where srun starts a new job step.
    Inside a job step (SLURM_STEP_ID set: an `srun -n1` wrapper, or a rank) it is False: an srun
    there would nest a step in a step."""
    return bool(env.get("SLURM_JOB_ID")) and not env.get("SLURM_STEP_ID")


def srun_command(cfg: RunConfig, device: str, entry: list[str], job_id: str) -> list[str]:
    """One srun job step whose tasks are the run's ranks (`python -m codist.rank.train ...` each).
    The geometry is the one the job asked for (job_resources); the rendezvous port is the config's
    launch.master_port or one derived from the job id (not a port free on this host: that says
    nothing of the first node)."""
    res = job_resources(cfg, device)
    master_port = cfg.launch.master_port or job_port(job_id)
    return ["srun", "--nodes", str(res["nodes"]), "--ntasks", str(cfg.parallel.world_size),
            "--ntasks-per-node", str(res["tasks_per_node"]), "--cpus-per-task", str(res["cpus_per_task"]),
            # Each rank sees all its node's GPUs (a step gets the job's GRES) and takes the one at its
            # LOCAL_RANK (codist.rank_env.gpu_index), as torchrun does: with --gpus-per-task=1 SLURM's
            # device cgroup hides the other GPUs, so NCCL cannot use CUDA IPC / NVLink between the
            # node's ranks (NVIDIA/nccl#129, #1066). launch.gpus_per_task opts into it (a site that
            # wants SLURM's GPU-CPU affinity binding; then the rank's one visible GPU is device 0).
            *(["--gpus-per-task=1"] if device == "cuda" and cfg.launch.gpus_per_task else []),
            # a rank's exit code 3 (preempted) must not kill the others mid-checkpoint
            # (--kill-on-bad-exit); 60 s after the first rank ends, srun ends the rest (a crash)
            "--kill-on-bad-exit=0", "--wait=60",
            # CODIST_OWNER names `codist run` by its pid on this node: a rank on another node would
            # think it gone; srun itself ends the step's tasks when it dies
            f"--export=ALL,MASTER_PORT={master_port},CODIST_OWNER=",
            sys.executable, "-m", *entry]


class SrunLauncher(Launcher):
    """Inside a SLURM job's batch script: one srun, one task per rank."""

    def command(self, plan):
        return srun_command(plan.cfg, plan.device, ["codist.rank.train", *plan.train_args],
                            plan.env["SLURM_JOB_ID"])

    def stop(self, proc, plan):
        """SIGUSR1, which srun passes on to every task (the ranks checkpoint and exit 3); srun
        answers SIGTERM itself by SIGKILLing the step: no checkpoint."""
        proc.send_signal(signal.SIGUSR1)
