"""Optimizer and learning-rate schedule from the config (plain torch objects DeepSpeed steps)."""
from __future__ import annotations

import math

import torch

from .config import OptimizerConfig, ScheduleConfig


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


def build_scheduler(optimizer, cfg: ScheduleConfig, total_steps: int):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg, total_steps))
