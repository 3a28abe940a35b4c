"""A DeepSpeed engine for one model, all-reducing gradients inside its own group only."""
from __future__ import annotations

import contextlib
import logging
import sys
from types import SimpleNamespace

import torch

from ..config import RunConfig
from .distributed import Topology
from .optim import build_optimizer, build_scheduler
from .precision import deepspeed_section


def deepspeed_config(cfg: RunConfig) -> dict:
    """The engine's JSON config. Data parallel (ZeRO stage 0), fp32 or mixed precision with fp32
    master weights (codist.runtime.precision), no built-in logging and no timers: DeepSpeed's throughput
    timer is on by default and synchronises the device at the start and end of every step (two
    host waits per update on a GPU); the wall-clock breakdown and the flops profiler would add their
    own. (No "comms_logger" key: DeepSpeed turns its comms logger on when the key exists at all.)"""
    b, m = cfg.train.batch_per_rank, cfg.parallel.ranks_per_model
    return {
        **deepspeed_section(cfg.train.precision),
        "train_micro_batch_size_per_gpu": b,
        "gradient_accumulation_steps": 1,
        "train_batch_size": b * m,             # per model group, not per world (ENGINE-FACTS)
        "gradient_clipping": cfg.optimizer.grad_clip,   # DeepSpeed would default to 1.0
        "zero_optimization": {"stage": 0},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
        "timers": {"throughput": {"enabled": False, "synchronized": False}},
        "flops_profiler": {"enabled": False},
        "dump_state": False,
    }


@contextlib.contextmanager
def without_fairseq(hide: bool):
    """DeepSpeed's engine imports fairseq (~3 s of CPU per rank) only to also accept fairseq
    optimizers; ours are torch optimizers. Unless the run uses fairseq anyway, that import
    fails fast here (ImportError, which DeepSpeed catches) and fairseq stays unimported."""
    if not hide or "fairseq" in sys.modules:
        yield
        return
    sys.modules["fairseq"] = None
    try:
        yield
    finally:
        if sys.modules.get("fairseq", 0) is None:
            del sys.modules["fairseq"]


def build_engine(cfg: RunConfig, topo: Topology, model: torch.nn.Module):
    import deepspeed
    from deepspeed.utils import logger as ds_logger
    ds_logger.setLevel(logging.WARNING)
    optimizer = build_optimizer(model.parameters(), cfg.optimizer)
    scheduler = build_scheduler(optimizer, cfg.schedule, cfg.train.steps)
    # DeepSpeed would set_device(LOCAL_RANK) itself: wrong where srun gives each task its own GPU (device 0,
    # codist.rank_env.gpu_index), so it gets the model's device; on CPU it is left as it was
    device = next(model.parameters()).device
    args = SimpleNamespace(device_rank=device.index) if device.type == "cuda" else None
    with without_fairseq(not cfg.workload.needs_fairseq):
        engine, _, _, _ = deepspeed.initialize(args=args, model=model, optimizer=optimizer, lr_scheduler=scheduler,
                                               config=deepspeed_config(cfg), mpu=topo.mpu())
    if topo.ranks_per_model == 1:
        # (runs step one-rank groups without an engine, updates.LocalUpdate; a plugin may still build one)
        # a one-rank model group has nothing to all-reduce, but the engine would still flatten,
        # "reduce" over one rank and copy back every gradient (~3% of a small model's step);
        # skipping it leaves the gradients bit-identical (no averaging factor at one rank)
        engine.enable_backward_allreduce = False
    return engine, optimizer
