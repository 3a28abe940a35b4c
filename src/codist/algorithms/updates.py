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


class EngineUpdate:
    def __init__(self, cfg: RunConfig, topo: Topology, model: nn.Module):
        self.engine, self.optimizer = build_engine(cfg, topo, model)
        self.model, self.scheduler = self.engine.module, self.engine.lr_scheduler
        self.forward_module = self.engine   # what the forward pass runs through

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

    def apply(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
