"""Turns a run config into the launcher command and runs it. Nothing else knows how
processes start.

Default: the DeepSpeed launcher (`deepspeed --num_gpus N --module codist.train ...`);
alternative: torchrun. Threads per rank = cores / ranks unless the config says otherwise
(the DeepSpeed launcher does not set OMP_NUM_THREADS; oversubscribed threads cost 3x).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from .config import ConfigError, RunConfig, dump


def resolve_device(cfg: RunConfig) -> str:
    if cfg.launch.device != "auto":
        return cfg.launch.device
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_fits(cfg: RunConfig, device: str, cores: int | None = None) -> None:
    """Fail before any process starts if the world does not fit this machine."""
    world = cfg.parallel.world_size
    if device == "cuda":
        import torch
        gpus = torch.cuda.device_count()
        if world > gpus:
            raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {gpus} GPU(s); "
                              f"allowed: 1..{gpus} (use the slurm profile for more)")
        return
    cores = cores or os.cpu_count() or 1
    if world > cores and not cfg.launch.oversubscribe:
        raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {cores} CPU cores; "
                          f"allowed: 1..{cores}, or set launch.oversubscribe=true to run more ranks than cores")


def threads_per_rank(cfg: RunConfig, cores: int | None = None) -> int:
    if cfg.launch.threads_per_rank:
        return cfg.launch.threads_per_rank
    return max(1, (cores or os.cpu_count() or 1) // cfg.parallel.world_size)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_command(cfg: RunConfig, config_path: Path, out: Path, port: int) -> list[str]:
    world = str(cfg.parallel.world_size)
    entry = ["codist.train", "--config", str(config_path), "--out", str(out)]
    if cfg.launch.launcher == "deepspeed":
        return [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", world,
                "--master_port", str(port), "--module", *entry]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", world,
            "--master_port", str(port), "-m", *entry]


def launch_env(cfg: RunConfig, device: str, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "OMP_NUM_THREADS": str(threads),
        "CODIST_THREADS_PER_RANK": str(threads),
        "CODIST_LAUNCHER": cfg.launch.launcher,
        "CODIST_LAUNCH_UNIX": repr(time.time()),
    })
    if device == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
    # the per-rank processes must import this very package, installed or not
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, env["PYTHONPATH"]]) if env.get("PYTHONPATH") else src
    return env


def run(cfg: RunConfig, out: str | os.PathLike) -> int:
    """Write the resolved config into `out`, start every rank, wait; returns the exit code."""
    device = resolve_device(cfg)
    check_fits(cfg, device)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.yaml"
    dump(cfg, config_path)
    port = cfg.launch.master_port or free_port()
    threads = threads_per_rank(cfg)
    cmd = build_command(cfg, config_path, out, port)
    proc = subprocess.run(cmd, env=launch_env(cfg, device, threads))
    if proc.returncode == 0 and not (out / "summary.json").exists():
        print(f"codist: launcher exited 0 but {out / 'summary.json'} was not written", file=sys.stderr)
        return 1
    return proc.returncode
