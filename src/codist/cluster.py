"""SLURM: what a run's job asks for, the job's host names, and how its ranks start.

One rule decides how a run's ranks start under SLURM, and the job's resources follow it:

- **srun tasks** (`ranks_by_srun`): every multi-rank run on GPUs, and multi-rank CPU runs whose
  launcher is deepspeed or torchrun. The job asks for `nodes` x `tasks_per_node` (= ranks per
  node) tasks of `cpus_per_task` (= CPUs per rank) CPUs each, `gres: gpu:<ranks per node>`, and
  `mpi` (snakemake-executor-plugin-slurm then runs the job's command in the batch script itself,
  not inside an `srun -n1` step). `codist run` in that batch script starts the ranks with one
  `srun` (one task per rank, one GPU per task: `srun_command`); each rank maps SLURM_PROCID /
  SLURM_LOCALID / SLURM_NTASKS to torch.distributed's RANK / LOCAL_RANK / WORLD_SIZE (`rank_env`).
  No nested srun (a `codist run` inside a job step never calls srun) and no ssh.
- **one task**: one-rank runs and the forking launchers (fork, warm: CPU only): the job asks for
  one task with all the run's CPUs, and `codist run` starts the ranks on its node as it would
  on any machine.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from typing import Mapping

from .config import ConfigError, RunConfig

FORKING_LAUNCHERS = ("fork", "warm")   # the ranks are forked from one CPU process on this machine
CPU_MEM_MB_PER_RANK = 2000             # a CPU rank's memory request (embedded workloads need < 1 GB)
PORT_BASE, PORT_SPAN = 20000, 30000    # ranks' rendezvous ports derived from the job id: 20000..49999


# ------------------------------------------------------------------ host names

def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's compact host list as host names, in SLURM's order: "gpu[01-02,05],cpu7" ->
    gpu01 gpu02 gpu05 cpu7; "rack[1-2]-node[01-02]" -> rack1-node01 rack1-node02 rack2-node01
    rack2-node02. The fallback of `hostnames` where scontrol is missing."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(nodelist):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(nodelist[start:i])
            start = i + 1
        if depth < 0 or depth > 1:
            raise ValueError(f"not a SLURM node list: {nodelist!r} (unbalanced brackets)")
    if depth:
        raise ValueError(f"not a SLURM node list: {nodelist!r} (unbalanced brackets)")
    items.append(nodelist[start:])
    hosts = []
    for item in filter(None, (s.strip() for s in items)):
        parts = re.split(r"\[([^\]]*)\]", item)   # text, ranges, text, ranges, ..., text
        choices = []
        for k, part in enumerate(parts):
            if k % 2 == 0:
                choices.append([part])
                continue
            names = []
            for rng in part.split(","):
                lo, _, hi = rng.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise ValueError(f"not a SLURM node list: {nodelist!r} (range {rng!r})")
                names += [f"{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
            choices.append(names)
        hosts += ["".join(p) for p in itertools.product(*choices)]
    return hosts


def hostnames(nodelist: str) -> list[str]:
    """The host names of a SLURM node list: `scontrol show hostnames` (SLURM's own parser) where
    scontrol exists, else expand_nodelist."""
    if not nodelist:
        return []
    conf = os.environ.get("SLURM_CONF")
    if shutil.which("scontrol") and (not conf or os.path.exists(conf)):   # (a missing conf: 60 s of retries)
        try:
            out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                                 timeout=10)
            if out.returncode == 0 and out.stdout.split():
                return out.stdout.split()
        except subprocess.TimeoutExpired:
            pass
    return expand_nodelist(nodelist)


# ------------------------------------------------------------------ job resources

def nodes_needed(cfg: RunConfig, device: str) -> int:
    """Nodes a run needs: one on CPU; world_size / gpus_per_node (rounded up) on GPUs."""
    if device != "cuda":
        return 1
    return -(-cfg.parallel.world_size // cfg.launch.gpus_per_node)


def ranks_by_srun(cfg: RunConfig, device: str) -> bool:
    """Whether, under SLURM, the run's ranks are srun tasks (else one task starts them locally)."""
    if cfg.parallel.world_size == 1:
        return False
    return device == "cuda" or cfg.launch.launcher not in FORKING_LAUNCHERS


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


# ------------------------------------------------------------------ starting ranks inside a job

def in_allocation(env: Mapping[str, str]) -> bool:
    """Inside a SLURM job's batch script (or salloc shell), where srun starts a new job step.
    Inside a job step (SLURM_STEP_ID set: an `srun -n1` wrapper, or a rank) it is False: an srun
    there would nest a step in a step."""
    return bool(env.get("SLURM_JOB_ID")) and not env.get("SLURM_STEP_ID")


def job_port(job_id: str | int) -> int:
    """The ranks' rendezvous port, the same on every node of a job: derived from the job id."""
    return PORT_BASE + int(job_id) % PORT_SPAN


def srun_command(cfg: RunConfig, device: str, entry: list[str], port: int | None, job_id: str) -> list[str]:
    """One srun job step whose tasks are the run's ranks (`python -m codist.train ...` each),
    started through `relay` (below). The geometry is the one the job asked for (job_resources);
    the rendezvous port is the config's launch.master_port or one derived from the job id
    (`port` is ignored: a port free on this host says nothing of the first node)."""
    res = job_resources(cfg, device)
    master_port = cfg.launch.master_port or job_port(job_id)
    return [sys.executable, "-m", "codist.cluster", "relay", "--",
            "srun", "--nodes", str(res["nodes"]), "--ntasks", str(cfg.parallel.world_size),
            "--ntasks-per-node", str(res["tasks_per_node"]), "--cpus-per-task", str(res["cpus_per_task"]),
            # each rank its own GPU (SLURM binds it: CUDA_VISIBLE_DEVICES of one entry, device 0 to the
            # rank, codist.rank_env.gpu_index), near its CPUs where the site's gres.conf says which are
            *(["--gpus-per-task=1"] if device == "cuda" else []),
            # a rank's exit code 3 (preempted) must not kill the others mid-checkpoint
            # (--kill-on-bad-exit); 60 s after the first rank ends, srun ends the rest (a crash)
            "--kill-on-bad-exit=0", "--wait=60",
            # CODIST_OWNER names `codist run` by its pid on this node: a rank on another node would
            # think it gone; srun itself ends the step's tasks when it dies
            f"--export=ALL,MASTER_PORT={master_port},CODIST_OWNER=",
            sys.executable, "-m", *entry]


def rank_env(env: Mapping[str, str]) -> dict[str, str]:
    """torch.distributed's env:// variables for a rank started as an srun task: RANK, LOCAL_RANK,
    WORLD_SIZE, LOCAL_WORLD_SIZE from SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
    SLURM_NTASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE; MASTER_ADDR = the first host of the step's
    node list (`scontrol show hostnames`); MASTER_PORT from the job id unless set. Empty when not
    an srun task or when a launcher already set RANK."""
    if "RANK" in env or "SLURM_PROCID" not in env or "SLURM_STEP_ID" not in env:
        return {}
    missing = [k for k in ("SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID") if not env.get(k)]
    if missing:
        raise RuntimeError(f"an srun task without {', '.join(missing)}: cannot derive its rank")
    out = {"RANK": env["SLURM_PROCID"], "LOCAL_RANK": env["SLURM_LOCALID"], "WORLD_SIZE": env["SLURM_NTASKS"]}
    per_node = (env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "").split("(")[0]
    if per_node.split(",")[0].isdigit():
        out["LOCAL_WORLD_SIZE"] = per_node.split(",")[0]
    if not env.get("MASTER_ADDR"):
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        hosts = hostnames(nodelist)
        if not hosts:
            raise RuntimeError("an srun task without SLURM_STEP_NODELIST: cannot find the first node")
        out["MASTER_ADDR"] = hosts[0]
    if not env.get("MASTER_PORT"):
        out["MASTER_PORT"] = str(job_port(env["SLURM_JOB_ID"]))
    return out


def apply_rank_env() -> None:
    """Set this process's torch.distributed variables if it is an srun task (idempotent)."""
    os.environ.update(rank_env(os.environ))


# ------------------------------------------------------------------ srun's signals

def relay(cmd: list[str]) -> int:
    """Run `cmd` (an srun) and turn SIGTERM, SIGINT or SIGUSR1 sent to this process into one
    SIGUSR1 to srun, which passes it on to every task: the ranks checkpoint and exit 3. (srun
    itself answers SIGTERM by killing the step with SIGKILL: no checkpoint.) Returns srun's
    exit code."""
    import signal
    proc = subprocess.Popen(cmd)

    def stop(signum, frame):
        try:
            proc.send_signal(signal.SIGUSR1)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, stop)
    return proc.wait()


if __name__ == "__main__":
    if sys.argv[1:3] != ["relay", "--"] or len(sys.argv) < 4:
        sys.exit("usage: python -m codist.cluster relay -- srun ...")
    sys.exit(relay(sys.argv[3:]))
