"""Update mechanics: how one model's group turns a loss into an applied update. A strategy
(`base.Algorithm`) picks one in `build_update`; the strategy decides the loss and what happens
around the update, the mechanics how gradients are reduced and the optimizer stepped.

- `EngineUpdate`: a DeepSpeed engine (gradients all-reduced inside the model's group).
- `LocalUpdate`: a model group of one rank, which has nothing to reduce: the engine's fp32 /
  torch_autocast ZeRO-0 step done directly (backward, clip, optimizer step, LR step), bit-identical
  to `EngineUpdate` at one rank (tested) without the engine's per-step bookkeeping or its set-up
  (the embedded ResNet's loop: +1.0% over a plain PyTorch loop, +2.0% through the engine;
  benchmarks/loop_overhead.py).
- `DDPUpdate`: torch DDP with a Python comm hook (DDP's built-in C++ all-reduce would bypass
  the communication meter; a Python hook's collectives are counted).
"""
from __future__ import annotations

import torch
from torch import nn

from ..config import RunConfig
from ..runtime.distributed import Topology
from ..runtime.engine import build_engine
from ..runtime.optim import build_optimizer, build_scheduler
from ..runtime.precision import grad_scaler


class EngineUpdate:
    def __init__(self, cfg: RunConfig, topo: Topology, model: nn.Module):
        self.engine, self.optimizer = build_engine(cfg, topo, model)
        self.model, self.scheduler = self.engine.module, self.engine.lr_scheduler
        self.forward_module = self.engine   # what the forward pass runs through
        # fp16: DeepSpeed's dynamic loss scaler (torch_autocast on ZeRO-0), checkpointed with the model
        self.scaler = self.engine.torch_autocast_z0_gradscaler

    def apply(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)
        self.engine.step()


class TorchUpdate:
    """A torch optimizer stepped by hand: zero, backward (fp16: scaled), clip, step, LR step. The
    forward runs through `forward_module` (the model itself, or a wrapper that reduces gradients)."""

    def __init__(self, cfg: RunConfig, model: nn.Module, forward_module: nn.Module):
        self.model, self.forward_module, self.grad_clip = model, forward_module, cfg.optimizer.grad_clip
        self.optimizer = build_optimizer(model.parameters(), cfg.optimizer)
        self.scheduler = build_scheduler(self.optimizer, cfg.schedule, cfg.train.steps)
        # fp16: dynamic loss scaling as the engine's (the forward's autocast is Algorithm.forward's)
        self.scaler = grad_scaler(cfg.train.precision, next(model.parameters()).device)

    def clip(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)

    def apply(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)   # clip the true gradients
        if self.grad_clip > 0:
            self.clip()
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)   # skipped when a gradient is inf/NaN
            self.scaler.update()
        self.scheduler.step()


class LocalUpdate(TorchUpdate):
    """One rank per model: the DeepSpeed engine's step without the engine. What the engine does at
    ZeRO-0 with fp32 or torch_autocast is this: the loss divided by 1 accumulation step (exact), no
    all-reduce (engine.build_engine turned it off at one rank), fp16's GradScaler with torch's
    defaults (the engine's), clipping as `deepspeed.runtime.utils.clip_grad_norm_` computes it,
    optimizer step, gradients to None, LR step."""

    def __init__(self, cfg: RunConfig, model: nn.Module):
        super().__init__(cfg, model, forward_module=model)

    @torch.no_grad()
    def clip(self) -> None:
        """DeepSpeed's clip_grad_norm_ at one rank, operation for operation (its norm of the per-tensor
        norms is pow(2).sum().pow(1/2), not torch's vector_norm: a last-bit difference otherwise);
        its own function would all-reduce the norm over DeepSpeed's data-parallel group, which
        without an engine is not this model's."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        norm = torch.stack([g.detach().float().norm(2.0) for g in grads]).pow(2.0).sum().float().pow(0.5)
        coef = torch.min(torch.tensor([1.0], device=norm.device),
                         torch.tensor([float(self.grad_clip)], device=norm.device) / (norm + 1e-6))
        for g in grads:
            g.mul_(coef)


class DDPUpdate(TorchUpdate):
    """`hook_state`, `hook`: as for `DistributedDataParallel.register_comm_hook`; `group`: the
    ranks whose gradients DDP reduces (None: the world). DDP's comm hooks reduce the fp32
    gradients, and are counted at 4 bytes per value. `ddp_options`: DDP's own (bucket_cap_mb)."""

    def __init__(self, cfg: RunConfig, model: nn.Module, group, hook_state, hook, **ddp_options):
        from torch.nn.parallel import DistributedDataParallel
        ddp = DistributedDataParallel(model, process_group=group, **ddp_options)
        ddp.register_comm_hook(hook_state, hook)
        super().__init__(cfg, model, forward_module=ddp)
