"""`--config device=cuda` (`make gpu-anil`): the planned runs on this machine's GPUs instead of the CPU
their configs name.

Only each run's launch section changes, which is not in the run id (codist.config.run_id): the same
runs, on another device, so a GPU results root compares with the CPU reference run by run. The launch
becomes: device cuda; the torchrun launcher (a forked child cannot use CUDA: the warm and fork
launchers are CPU-only); gloo collectives, which let a node's ranks share its GPUs round-robin (a lent
machine has one GPU, and a 2-rank codistillation run puts both ranks on it; NCCL cannot). The threads
per rank stay the workflow's. Each run's manifest records the GPUs it saw (`hardware.gpus`), and
workflows/machine.py carries them into the results' machine.json.
"""
from __future__ import annotations

from codist.config import ConfigError, to_dict, validate

LAUNCH = {"device": "cuda", "launcher": "torchrun", "backend": "gloo"}


class GpuPlanError(ValueError):
    """A planned run that cannot be moved to CUDA: one line naming it and why."""


def on_cuda(plan):
    """The plan with every run's launch moved to CUDA (LAUNCH); its run ids unchanged (checked)."""
    for rid, cfg in list(plan.configs.items()):
        d = to_dict(cfg)
        d["launch"].update(LAUNCH)
        try:
            moved = validate(d, source=f"run {rid} on cuda")
        except ConfigError as e:
            raise GpuPlanError(str(e)) from None
        if moved.run_id() != rid:   # the launch section is outside the id; a change here would be a bug
            raise GpuPlanError(f"run {rid}: moving it to cuda changed its run id to {moved.run_id()}")
        plan.configs[rid] = moved
    return plan
