"""What a rank's environment holds for its threads and device, and which GPU it uses, computed
without the config module: `codist.launch.launch_env` starts from it for every launcher, and the
warm client needs it before validating a config, to find the warm server whose imports were made
under that environment."""
from __future__ import annotations

import os
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
