"""What a rank's environment holds for its threads and device, which GPU it uses, and, for a rank
started as an srun task, torch.distributed's variables from SLURM's (`srun_env`), computed without
the config module: codist.launching.launch.launch_env starts from it for every launcher, the warm
server is keyed by the import-time part of it, and the ranks read it (codist.runtime.distributed). The
contract between the process side and the ranks: it imports nothing of codist."""
from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

# a GPU torch can use needs one of these kernel-driver nodes (NVIDIA; AMD ROCm; WSL2)
GPU_DRIVER_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


def no_gpu_possible(environ: Mapping[str, str] = os.environ) -> bool:
    """No GPU can be visible to this process (Linux: no driver node, or CUDA_VISIBLE_DEVICES empty),
    known without importing torch (~2 s)."""
    return sys.platform.startswith("linux") and (environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1") or
                                                 not any(os.path.exists(p) for p in GPU_DRIVER_NODES))


def gpu_index(environ: Mapping[str, str] = os.environ) -> int:
    """The CUDA device index of this rank. Where one GPU is visible to it (SLURM's srun
    --gpus-per-task=1 or --gpu-bind gives each task its own CUDA_VISIBLE_DEVICES entry, or a task
    asked SLURM_GPUS_PER_TASK=1) that GPU is device 0, whatever the rank's LOCAL_RANK; otherwise
    the node's ranks share the visible GPUs and LOCAL_RANK picks one. A LOCAL_RANK beyond the
    visible GPUs is one line naming both."""
    local = int(environ.get("LOCAL_RANK", "0"))
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return 0 if environ.get("SLURM_GPUS_PER_TASK") == "1" else local
    devices = [d for d in visible.split(",") if d.strip()]
    if len(devices) == 1:
        return 0
    if local >= len(devices):
        raise RuntimeError(f"LOCAL_RANK={local} but CUDA_VISIBLE_DEVICES={visible!r} shows {len(devices)} GPU(s): "
                           f"one GPU per rank needs as many visible GPUs as ranks on the node, or one per task "
                           f"(srun --gpus-per-task=1)")
    return local


def usable_cores() -> int:
    """The CPUs this process may run on (a SLURM job's or a cgroup's share, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def rank_threads(environ: Mapping[str, str], configured: int | None, cores: int | None = None) -> int:
    """Threads of this rank: launch.threads_per_rank where set. Otherwise, an srun task uses its own
    node's allocation, not the value the launching host computed from its cores and the world size:
    SLURM_CPUS_PER_TASK, else the usable cores (`cores`) shared by the node's tasks. A rank of a
    local launcher takes what the launcher set (CODIST_THREADS_PER_RANK / OMP_NUM_THREADS)."""
    if configured:
        return configured
    if environ.get("SLURM_STEP_ID") and "SLURM_PROCID" in environ:
        per_task = environ.get("SLURM_CPUS_PER_TASK", "")
        if per_task.isdigit() and int(per_task) > 0:
            return int(per_task)
        per_node = (environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE") or "1")
        per_node = per_node.split("(")[0].split(",")[0]
        return max(1, (cores or usable_cores()) // max(1, int(per_node) if per_node.isdigit() else 1))
    return int(environ.get("CODIST_THREADS_PER_RANK") or environ.get("OMP_NUM_THREADS") or 1)


def rank_env(base: Mapping[str, str], threads: int, device: str) -> dict[str, str]:
    env = dict(base)
    env["OMP_NUM_THREADS"] = env["CODIST_THREADS_PER_RANK"] = str(threads)
    if device == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
    # the ranks use this environment's tools (e.g. its ninja to build DeepSpeed ops: two ninja
    # versions alternating over one build directory rebuild it every time)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # the per-rank processes must import this very package, installed or not
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, env["PYTHONPATH"]]) if env.get("PYTHONPATH") else src
    return env


def local_rank_env(rank: int, world: int, port: int, addr: str = "127.0.0.1") -> dict[str, str]:
    """torchrun's env:// variables for rank `rank` of a one-node world (the lone rank, a forked one)."""
    n = str(world)
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n, "GROUP_RANK": "0",
            "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": n, "MASTER_ADDR": addr,
            "MASTER_PORT": str(port)}


# ------------------------------------------------------------------ an srun task's rank

# The ranks' rendezvous ports derived from the job id: 20000..31999. Below the kernel's ephemeral
# range (Linux's default 32768-60999, /proc/sys/net/ipv4/ip_local_port_range; IANA's 49152-65535),
# where any outgoing connection on the node may already hold the port, and above the ports below
# 20000 that common services register (memcached 11211, ...).
PORT_BASE, PORT_SPAN = 20000, 12000


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


def job_port(job_id: str | int) -> int:
    """The ranks' rendezvous port, the same on every node of a job: derived from the job id."""
    return PORT_BASE + int(job_id) % PORT_SPAN


def srun_env(env: Mapping[str, str]) -> dict[str, str]:
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


def apply_srun_env() -> None:
    """Set this process's torch.distributed variables if it is an srun task (idempotent)."""
    os.environ.update(srun_env(os.environ))
