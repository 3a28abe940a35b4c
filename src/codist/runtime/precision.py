"""`train.precision`: fp32, or mixed precision with fp32 master weights (bf16, fp16).

Mixed precision goes through DeepSpeed's `torch_autocast` section, not its `bf16` / `fp16`
sections. Those cast the parameters themselves to 16 bits (ZeRO-0 bf16: FP16_UnfusedOptimizer)
but keep the buffers fp32 (`DeepSpeedEngine._cast_module_mixed_precision`), so on 2 gloo ranks a
ResNet fails in its first forward: an fp32 image into the bf16 convolution ("Input type (float)
and bias type (c10::BFloat16) should be the same"), a bf16 one in BatchNorm's fp32 running
statistics ("expected scalar type BFloat16 but found Float"); every workload would have to cast
its inputs, and teachers, averaged models and checkpoints would hold 16-bit weights. With `torch_autocast` the parameters stay fp32 (they are the master
weights), the forward runs under torch.autocast, fp16 gets DeepSpeed's dynamic loss scaling (a
torch.amp.GradScaler: a step with inf/NaN gradients is skipped and the scale halved), and
`communication_data_type` makes the engine cast each gradient bucket to 16 bits before the
all-reduce: that tensor is what is sent, so the meter counts 2 bytes per value.

The model outputs are cast back to fp32 (`Algorithm.forward`), so task, distillation and ensemble
terms are computed in fp32 (`codist.algorithms.distillation_loss` and the output ensemble cast
their inputs too).
Evaluation runs under the same autocast (which computes its losses in fp32), so a local model and
an ensemble of such models are scored alike.
"""
from __future__ import annotations

import contextlib

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def deepspeed_section(precision: str) -> dict:
    """The DeepSpeed config keys for `precision` (none for fp32: the engine's fp32 default)."""
    if precision == "fp32":
        return {}
    return {"torch_autocast": {"enabled": True, "dtype": precision}, "communication_data_type": precision}


def autocast(precision: str, device: torch.device):
    """The forward pass's autocast context (none for fp32): for forwards outside the engine (teachers,
    ensemble members, evaluation), so they run at the precision the engine's forward does."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def grad_scaler(precision: str, device: torch.device):
    """fp16's dynamic loss scaling for updates outside DeepSpeed (torch DDP); None otherwise."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None
