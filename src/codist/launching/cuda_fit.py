"""Before launch: can this machine's NVIDIA driver and GPUs run the installed torch's CUDA build?

A torch wheel built for CUDA 13 needs a driver >= 580 and has no kernels for GPUs older than Turing
(V100: compute capability 7.0); with an older driver `torch.cuda.is_available()` is simply False, so
`launch.device: auto` would train on the CPU without a word, and `cuda` would fail inside every rank.
`check` says so in one line before any rank starts, naming the driver, the GPU and the wheel's CUDA,
and the CUDA 12 route (`make install CUDA=12`, env/requirements-cu12.txt). `misfit` is the decision
alone, on given version strings; the rest reads the machine (/proc/driver/nvidia/version, else
nvidia-smi) and the installed torch (torch.version.cuda, torch.cuda.get_arch_list()).
"""
from __future__ import annotations

import re
import subprocess
from typing import Mapping, Sequence

#: the oldest Linux driver that runs a CUDA major version's libraries (NVIDIA's minor-version
#: compatibility: any 12.x runtime on >= 525.60.13, any 13.x on >= 580.65.06)
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
#: the oldest GPUs a CUDA major version builds kernels for (CUDA 13 dropped Maxwell, Pascal, Volta)
MIN_CAPABILITY = {13: (7, 5)}
REMEDY = "install torch's CUDA 12 build (make install CUDA=12; docs/full-scale.md)"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def misfit(driver: str | None, cuda: str | None, torch_version: str, gpus: Sequence[tuple[str, str]] = (),
           arch_list: Sequence[str] = ()) -> str | None:
    """Why the driver `driver` ("535.104.05") and the GPUs `gpus` ([(name, "7.0")]) cannot run torch
    `torch_version` built for CUDA `cuda` ("13.0"; None: a CPU build) with kernels for `arch_list`
    (["sm_75", ...], empty if unknown), or None when they fit (or nothing is known)."""
    if cuda is None:
        return f"the installed torch {torch_version} is a CPU build (torch.version.cuda is None)"
    major = _version(cuda)[0]
    if driver is None:
        return f"no NVIDIA driver found (/proc/driver/nvidia/version, nvidia-smi) for torch {torch_version} (CUDA {cuda})"
    least = MIN_DRIVER.get(major)
    if least and _version(driver) < _version(least):
        return (f"the NVIDIA driver {driver} is older than CUDA {cuda} needs (>= {least}), "
                f"which the installed torch {torch_version} is built for: {REMEDY}, or a newer driver")
    built = {_version(a) for a in arch_list if a.startswith("sm_")}
    ptx = [_version(a) for a in arch_list if a.startswith("compute_")]
    for i, (name, capability) in enumerate(gpus):
        cap = _version(capability)
        sm = (cap[0] * 10 + cap[1],)
        if arch_list:
            ok = sm in built or any(p <= sm for p in ptx)   # a kernel for it, or PTX the driver compiles
        else:
            ok = cap >= MIN_CAPABILITY.get(major, (0, 0))
        if not ok:
            has = f"kernels for {', '.join(arch_list)}" if arch_list else "no kernels for it"
            return (f"GPU {i} ({name}, compute capability {capability}) cannot run torch {torch_version} built for "
                    f"CUDA {cuda} ({has}): {REMEDY}")
    return None


def driver_version() -> str | None:
    """The loaded NVIDIA kernel module's version, e.g. "580.65.06" (None without one)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    out = _smi("driver_version")
    return out[0][0] if out else None


def gpus() -> list[tuple[str, str]]:
    """(name, compute capability) of every GPU nvidia-smi lists."""
    return [(row[0], row[1]) for row in _smi("name,compute_cap") if len(row) == 2]


def _smi(fields: str) -> list[list[str]]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode:
        return []
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def check(requested: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise ConfigError naming the driver, GPU and torch's CUDA when `launch.device` (`requested`)
    could use a GPU here that the installed torch cannot. Nothing to check for `cpu`, nor for
    `auto` where no GPU can exist (codist.rank_env.no_gpu_possible) or no driver version is readable."""
    import os

    from ..config import ConfigError
    from ..rank_env import no_gpu_possible
    environ = os.environ if environ is None else environ
    if requested == "cpu" or (requested == "auto" and no_gpu_possible(environ)):
        return
    driver = driver_version()
    if requested == "auto" and driver is None:
        return
    import torch
    why = misfit(driver, torch.version.cuda, torch.__version__, gpus(), torch.cuda.get_arch_list())
    if why:
        hint = " (or launch.device=cpu to train on the CPU)" if requested == "auto" else ""
        raise ConfigError(f"launch.device={requested}: {why}{hint}")
