"""The check before launch (codist.launching.cuda_fit) on given driver, GPU and wheel versions, and the two
install routes of env/install.sh (the lock's CUDA 13 torch, or CUDA=12) run for real with a stand-in
Python that records its pip calls (nothing is downloaded)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from codist.launching import cuda_fit
from codist.config import ConfigError
from codist.launching.cuda_fit import misfit

ROOT = Path(__file__).resolve().parents[1]
CU13_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]   # torch 2.14.1+cu130's list
CU126_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
H100, V100 = ("NVIDIA H100 80GB HBM3", "9.0"), ("Tesla V100-SXM2-32GB", "7.0")


def test_a_driver_too_old_for_the_wheel_names_both():
    why = misfit("535.104.05", "13.0", "2.14.1+cu130", [H100], [])
    assert why == ("the NVIDIA driver 535.104.05 is older than CUDA 13.0 needs (>= 580.65.06), which the installed "
                   "torch 2.14.1+cu130 is built for: install torch's CUDA 12 build (make install CUDA=12; "
                   "docs/full-scale.md), or a newer driver")
    assert misfit("580.65.06", "13.0", "2.14.1", [H100], CU13_ARCHS) is None
    assert misfit("590.1", "13.0", "2.14.1", [H100], CU13_ARCHS) is None
    assert misfit("525.60.13", "12.6", "2.14.1+cu126", [V100], CU126_ARCHS) is None   # the CUDA 12 route
    assert "older than CUDA 12.6 needs (>= 525.60.13)" in misfit("470.82.01", "12.6", "2.14.1+cu126", [V100])


def test_a_gpu_the_wheel_has_no_kernels_for_names_it():
    why = misfit("580.65.06", "13.0", "2.14.1+cu130", [H100, V100], CU13_ARCHS)
    assert why.startswith("GPU 1 (Tesla V100-SXM2-32GB, compute capability 7.0) cannot run torch 2.14.1+cu130 "
                          "built for CUDA 13.0 (kernels for sm_75, sm_80")
    # without the wheel's list (torch could not start CUDA): CUDA 13 builds nothing before Turing
    assert "compute capability 7.0" in misfit("580.65.06", "13.0", "2.14.1", [V100], [])
    assert misfit("580.65.06", "13.0", "2.14.1", [("T4", "7.5")], []) is None
    # PTX for an older architecture is compiled by the driver for a newer GPU
    assert misfit("590.0", "13.0", "2.14.1", [("B300", "10.3")], ["sm_90", "compute_90"]) is None
    assert misfit("590.0", "13.0", "2.14.1", [("B300", "10.3")], ["sm_90"]) is not None


def test_a_cpu_wheel_or_no_driver():
    assert misfit("580.65.06", None, "2.14.1+cpu") == \
        "the installed torch 2.14.1+cpu is a CPU build (torch.version.cuda is None)"
    assert misfit(None, "13.0", "2.14.1").startswith("no NVIDIA driver found")


def test_check_before_launch(monkeypatch):
    """cpu never checks; auto where no GPU can exist, or no driver is readable, does not either;
    otherwise a misfit is one ConfigError naming the key."""
    import torch
    monkeypatch.setattr(cuda_fit, "driver_version", lambda: "535.104.05")
    monkeypatch.setattr(cuda_fit, "gpus", lambda: [H100])
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    cuda_fit.check("cpu")
    cuda_fit.check("auto", {"CUDA_VISIBLE_DEVICES": ""})   # no GPU can be visible
    with pytest.raises(ConfigError, match=r"^launch.device=cuda: the NVIDIA driver 535.104.05 is older than CUDA "
                                          r"13.0 needs .*make install CUDA=12"):
        cuda_fit.check("cuda")
    import codist.rank_env
    monkeypatch.setattr(codist.rank_env, "no_gpu_possible", lambda environ: False)
    with pytest.raises(ConfigError, match=r"^launch.device=auto: .* \(or launch.device=cpu to train on the CPU\)$"):
        cuda_fit.check("auto")
    monkeypatch.setattr(cuda_fit, "driver_version", lambda: None)
    cuda_fit.check("auto")   # a driver node but no readable version: nothing known, nothing refused


def test_driver_version_from_the_kernel_module_line(monkeypatch, tmp_path):
    import builtins
    lines = {"proprietary": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
             "open": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder)"}
    real_open = builtins.open
    for kind, want in (("proprietary", "535.104.05"), ("open", "580.65.06")):
        (tmp_path / kind).write_text(lines[kind] + "\nGCC version:  gcc version 12.2.0\n")
        monkeypatch.setattr(builtins, "open", lambda p, *a, _k=kind, **kw: real_open(
            tmp_path / _k if p == "/proc/driver/nvidia/version" else p, *a, **kw))
        assert cuda_fit.driver_version() == want


# --------------------------------------------------------------------------- env/install.sh's two routes

FAKE_PYTHON = """#!/bin/sh
# a stand-in Python: the platform check's answer, and each pip call with the requirement file's lines
if [ "$1" = "-c" ]; then printf 'Linux x86_64 3.11'; exit 0; fi
echo "CALL $*" >> "$LOG"
prev=""
for a in "$@"; do
    if [ "$prev" = "-r" ]; then sed 's/^/  /' "$a" >> "$LOG"; fi
    prev=$a
done
"""


def install(tmp_path: Path, cuda: str | None) -> subprocess.CompletedProcess:
    py = tmp_path / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    env = {**os.environ, "LOG": str(tmp_path / "calls.log")}
    env.pop("CUDA", None)
    if cuda is not None:
        env["CUDA"] = cuda
    return subprocess.run(["sh", str(ROOT / "env/install.sh"), str(py)], env=env, capture_output=True, text=True,
                          timeout=60)


def calls(tmp_path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for line in (tmp_path / "calls.log").read_text().splitlines():
        if line.startswith("CALL "):
            out.append((line[5:], []))
        elif line.strip() and not line.strip().startswith("#"):
            out[-1][1].append(line.strip())
    return out


def test_install_default_is_the_lock(tmp_path):
    assert install(tmp_path, None).returncode == 0
    got = calls(tmp_path)
    assert [c for c, _ in got] == ["-m pip install -r env/requirements.lock",
                                   "-m pip install --no-build-isolation --no-deps -r env/requirements-fairseq.txt",
                                   "-m pip install --no-deps -e ."]
    assert "torch==2.14.1" in got[0][1]


def test_install_cuda12_takes_torch_from_the_cuda12_file_and_the_rest_from_the_lock(tmp_path):
    assert install(tmp_path, "12").returncode == 0
    (rest_call, rest), (cu12_call, cu12), *after = calls(tmp_path)
    assert rest_call.startswith("-m pip install --no-deps -r ") and cu12_call == "-m pip install -r env/requirements-cu12.txt"
    lock = [ln.strip() for ln in (ROOT / "env/requirements.lock").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    dropped = [ln for ln in lock if ln not in rest]
    names = {ln.split("==")[0] for ln in dropped}
    assert {"torch", "torchvision", "triton", "nvidia-nccl-cu13", "cuda-toolkit"} <= names
    assert all(n in ("torch", "torchvision", "triton") or n.startswith(("nvidia-", "cuda-")) for n in names), names
    assert "torchaudio==2.11.1" in rest and "deepspeed==0.19.8" in rest and set(rest) <= set(lock)
    assert cu12 == ["--index-url https://download.pytorch.org/whl/cu126", "torch==2.14.1+cu126",
                    "torchvision==0.29.1+cu126"]
    assert [c for c, _ in after] == ["-m pip install --no-build-isolation --no-deps -r env/requirements-fairseq.txt",
                                     "-m pip install --no-deps -e ."]


def test_install_names_an_unknown_cuda(tmp_path):
    done = install(tmp_path, "11")
    assert done.returncode == 2 and "env/install.sh: CUDA=11: expected 13 (the lock" in done.stderr
    assert not (tmp_path / "calls.log").exists()


def test_the_srun_path_checks_too(monkeypatch):
    """In a SLURM batch script the ranks are srun tasks and the local GPU count is not checked;
    the driver and the wheel still are, before srun starts anything."""
    import torch

    from codist import config
    from codist.launching.launch import check_fits
    monkeypatch.setattr(cuda_fit, "driver_version", lambda: "535.104.05")
    monkeypatch.setattr(cuda_fit, "gpus", lambda: [V100])
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    cfg = config.validate({"parallel": {"world_size": 16}, "launch": {"device": "cuda"}})
    with pytest.raises(ConfigError, match="launch.device=cuda: the NVIDIA driver 535.104.05 is older than CUDA 13.0"):
        check_fits(cfg, "cuda")
