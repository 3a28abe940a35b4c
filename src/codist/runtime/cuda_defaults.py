"""What a practitioner sets when training on a GPU, applied only when the rank's device is CUDA
(on CPU every function here leaves things as they are, so CPU runs and their tests are unchanged,
but for the deterministic mode a run asks for):

- cuDNN autotuning (`cudnn.benchmark`): the input shapes are fixed per run, so the one-off search
  for the fastest convolution algorithm pays for itself within a few updates;
- TF32 for fp32 matmuls and convolutions (`train.tf32`, default on): tensor cores on Ampere and newer
  (the budget's fp32 rates assume it); `train.tf32: false` keeps full fp32 products;
- channels_last (NHWC) for convolutional models (`WorkloadSection.convnet`): cuDNN's tensor-core
  convolutions run in it (PyTorch converts NCHW inputs of a channels_last convolution itself);
- pinned host memory for the image loader's batches, so the `non_blocking` copies of
  `codist.runtime.data.to_device` overlap the compute (the loader's workers live for the whole run: its
  batch sampler never ends, which is what `persistent_workers` would give a finite one);
- `train.deterministic` (default off; any device): torch.use_deterministic_algorithms(True), cuDNN
  without autotuning, cuBLAS's deterministic workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8), so two runs
  of one config on one machine give the same numbers;
- `train.compile`: torch.compile of each trained model, in place (`nn.Module.compile`), so its
  state dict, checkpoints and teachers keep their keys. Any device (on CPU it needs a C++ compiler).
"""
from __future__ import annotations

import os

import torch
from torch import nn


#: cuBLAS's workspace setting under which its matmuls are deterministic (CUDA's and torch's
#: reproducibility notes): with it unset, torch.use_deterministic_algorithms fails cuBLAS calls
CUBLAS_DETERMINISTIC = ":4096:8"


def configure_backends(device: torch.device, tf32: bool = True, deterministic: bool = False) -> None:
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        # "high": TF32 (or bf16x3) products for fp32 matmuls; the process-wide setting, so only on a GPU
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        torch.backends.cudnn.allow_tf32 = tf32
    if deterministic:   # train.deterministic, on any device (CPU kernels too have nondeterministic ones)
        # read when cuBLAS makes its first handle: here, before any matmul of the rank
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC
        torch.use_deterministic_algorithms(True)   # an op without a deterministic kernel raises, naming it
        torch.backends.cudnn.benchmark = False     # autotuning may pick another algorithm each run
        torch.backends.cudnn.deterministic = True


def backend_settings() -> dict:
    """What the process's math backends are set to, for the run's manifest."""
    return {"float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32, "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}


def place_model(model: nn.Module, device: torch.device, convnet: bool) -> nn.Module:
    """`model` on `device`, in channels_last when it is a convnet on a GPU."""
    model = model.to(device)
    if device.type == "cuda" and convnet:
        model = model.to(memory_format=torch.channels_last)
    return model


def maybe_compile(model: nn.Module, compile_: bool) -> nn.Module:
    if compile_:
        model.compile()
    return model


def pin_memory() -> bool:
    """Whether the loader should pin its batches (only with a GPU to copy them to)."""
    return torch.cuda.is_available()
