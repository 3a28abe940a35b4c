"""Optimizer and learning-rate schedule from the config (plain torch objects DeepSpeed steps)."""
from __future__ import annotations

import math

import torch

from ..config import OptimizerConfig, ScheduleConfig


def build_optimizer(params, cfg: OptimizerConfig) -> torch.optim.Optimizer:
    if cfg.name == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                               weight_decay=cfg.weight_decay)
    if cfg.name == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    if cfg.name == "adagrad":
        return torch.optim.Adagrad(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    raise ValueError(f"optimizer.name={cfg.name!r}: unknown")


def lr_factor(step: int, cfg: ScheduleConfig, total_steps: int) -> float:
    """Multiplier of the base lr at update `step` (0-based): linear warmup, then the schedule."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.name == "constant":
        return 1.0
    if cfg.name == "step":
        return cfg.gamma ** sum(step >= m for m in cfg.milestones)
    span = max(1, total_steps - cfg.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * (step - cfg.warmup_steps) / span))


def weight_decay_at(step: int, base: float, changes: dict[int, float]) -> float:
    """Weight decay in force at update `step`: the latest change at or before it, else `base`."""
    past = [k for k in changes if k <= step]
    return changes[max(past)] if past else base


class Schedule(torch.optim.lr_scheduler.LambdaLR):
    """The lr schedule; also sets the optimizer's weight decay per `schedule.weight_decay_changes`.
    Its state (steps taken, changes, base decay) is plain data, so checkpoints resume it exactly."""

    def __init__(self, optimizer, cfg: ScheduleConfig, total_steps: int):
        self.wd_changes = {int(k): float(v) for k, v in cfg.weight_decay_changes.items()}
        self.wd_base = [g["weight_decay"] for g in optimizer.param_groups]
        super().__init__(optimizer, lambda s: lr_factor(s, cfg, total_steps))

    def step(self, epoch=None):
        super().step(epoch)
        if self.wd_changes:   # last_epoch is now the index of the next update
            for group, base in zip(self.optimizer.param_groups, self.wd_base):
                group["weight_decay"] = weight_decay_at(self.last_epoch, base, self.wd_changes)


def build_scheduler(optimizer, cfg: ScheduleConfig, total_steps: int):
    return Schedule(optimizer, cfg, total_steps)
