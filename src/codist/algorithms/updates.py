"""Update mechanics: how one model's group turns a loss into an applied update. A strategy
(`base.Algorithm`) picks one in `build_update`; the strategy decides the loss and what happens
around the update, the mechanics how gradients are reduced and the optimizer stepped.

- `EngineUpdate`: a DeepSpeed engine (gradients all-reduced inside the model's group).
- `DDPUpdate`: torch DDP with a Python comm hook (DDP's built-in C++ all-reduce would bypass
  the communication meter; a Python hook's collectives are counted).
"""
from __future__ import annotations

import torch
from torch import nn

from ..config import RunConfig
from ..distributed import Topology
from ..engine import build_engine
from ..optim import build_optimizer, build_scheduler
from ..precision import grad_scaler


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


class DDPUpdate:
    """`hook_state`, `hook`: as for `DistributedDataParallel.register_comm_hook`; `group`: the
    ranks whose gradients DDP reduces (None: the world)."""

    def __init__(self, cfg: RunConfig, model: nn.Module, group, hook_state, hook):
        from torch.nn.parallel import DistributedDataParallel
        self.model, self.grad_clip = model, cfg.optimizer.grad_clip
        self.forward_module = DistributedDataParallel(model, process_group=group)
        self.forward_module.register_comm_hook(hook_state, hook)
        self.optimizer = build_optimizer(model.parameters(), cfg.optimizer)
        self.scheduler = build_scheduler(self.optimizer, cfg.schedule, cfg.train.steps)
        # fp16: dynamic loss scaling as the engine's (the forward's autocast is Algorithm.forward's);
        # DDP's comm hooks reduce the fp32 gradients, and are counted at 4 bytes per value
        self.scaler = grad_scaler(cfg.train.precision, next(model.parameters()).device)

    def apply(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)   # clip the true gradients
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)   # skipped when a gradient is inf/NaN
            self.scaler.update()
        self.scheduler.step()
