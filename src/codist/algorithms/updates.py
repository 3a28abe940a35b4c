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
  the communication meter; a Python hook's collectives are counted). Its bucket layout is
  checkpointed (`buckets`) and given to a resumed run's DDP (`restore_buckets`).
- `OverlapUpdate` (`parallel.grad_reduction: ddp`): a model group of several ranks reduced by DDP
  instead of the engine, each bucket's all-reduce issued as soon as its gradients are ready, while
  backward goes on (the engine's start after backward ends); otherwise the engine's update.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist
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

    def clip(self) -> None:
        clip_as_deepspeed(self.model, self.grad_clip)


@torch.no_grad()
def clip_as_deepspeed(model: nn.Module, max_norm: float, group=None, ranks: int = 1) -> None:
    """DeepSpeed's clip_grad_norm_, operation for operation (its norm of the per-tensor norms is
    pow(2).sum().pow(1/2), not torch's vector_norm: a last-bit difference otherwise). It averages
    the norm over the model's group (`ranks` of `group`: equal on each after the gradients' all-reduce,
    but the mean's rounding is the engine's); its own function would take DeepSpeed's data-parallel
    group, which without an engine is not this model's. At one rank there is nothing to average."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.stack([g.detach().float().norm(2.0) for g in grads]).pow(2.0).sum().float().pow(0.5)
    if ranks > 1:
        norm = norm * 1.0 / float(ranks)
        dist.all_reduce(norm, group=group)
    coef = torch.min(torch.tensor([1.0], device=norm.device),
                     torch.tensor([float(max_norm)], device=norm.device) / (norm + 1e-6))
    for g in grads:
        g.mul_(coef)


class DDPUpdate(TorchUpdate):
    """`hook_state`, `hook`: as for `DistributedDataParallel.register_comm_hook`; `group`: the
    ranks whose gradients DDP reduces (None: the world). DDP's comm hooks reduce the fp32
    gradients, and are counted at 4 bytes per value. `ddp_options`: DDP's own (bucket_cap_mb,
    forward_sync_buffers: by default its first rank's BatchNorm statistics before every forward)."""

    def __init__(self, cfg: RunConfig, model: nn.Module, group, hook_state, hook, **ddp_options):
        self.group, self.hook, self.ddp_options = group, (hook_state, hook), ddp_options
        self.layout: list[list[int]] = []   # given to a resumed run's DDP: in effect until DDP's own rebuild
        super().__init__(cfg, model, forward_module=self._wrap(model))

    @property
    def broadcasts_buffers(self) -> bool:
        return self.ddp_options.get("forward_sync_buffers", True)

    def _wrap(self, model: nn.Module, **extra) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel
        ddp = DistributedDataParallel(model, process_group=self.group, **self.ddp_options, **extra)
        ddp.register_comm_hook(*self.hook)
        return ddp

    # DDP reduces its first update in one bucket in parameter order, then rebuilds its buckets once,
    # in the order the gradients became ready, and keeps that layout. A resumed process's DDP would
    # start again from the first layout: PowerSGD's memories (P, Q, the residuals) are laid out by
    # bucket, so its first update after a restart differed (one bucket) or failed on their sizes
    # (several), and a plain all-reduce over more than two ranks may add a value in another order.
    # Re-keying the memories by parameter would not make it exact (Q's random start and the
    # all-reduces follow the bucket's order too), so the checkpoint keeps the rebuilt layout, as
    # DDP's own logging data records it, and a resumed run's DDP starts with it: every update then
    # runs on the uninterrupted run's layout, and DDP's own rebuild after the first finds the same
    # order. torch has no call that sets a layout on a built DDP, so the DDP is built again.
    def buckets(self) -> list[list[int]]:
        """The layout a checkpoint keeps (a resumed DDP runs on the given one until its own rebuild)."""
        return rebuilt_buckets(self.forward_module) or self.layout

    def restore_buckets(self, buckets: list[list[int]]) -> None:
        """A new DDP that starts with a checkpoint's `buckets`; the old one reduces nothing more."""
        self.forward_module.reducer._remove_autograd_hooks()
        with bucket_layout(buckets):
            # init_sync off: the checkpoint has just set every rank's parameters (post-local SGD's
            # differ between groups of its world-wide DDP; a broadcast would overwrite them)
            self.forward_module = self._wrap(self.model, init_sync=False)
        self.layout = buckets


class OverlapUpdate(DDPUpdate):
    """`parallel.grad_reduction: ddp`: a model group of several ranks reduced by torch DDP instead of
    the DeepSpeed engine. DDP all-reduces a bucket of gradients as soon as backward has produced
    them all (`parallel.ddp_bucket_mb`, else DDP's 25 MiB, the first 1 MiB), while backward goes
    on to the earlier layers; the engine all-reduces every gradient after backward ends. (DDP's
    first update is one bucket in parameter order, so its reduction starts when backward ends;
    from the second on its buckets follow the order the gradients become ready.)

    Otherwise it is the engine's update: the gradients averaged over the group as the engine
    averages them (the hook divides by the group's size before the sum, the engine after it:
    equal at 2 ranks, tested), bf16 / fp16 all-reduced in 16 bits as the engine's
    `communication_data_type` (torch's compress hooks), DeepSpeed's clipping arithmetic
    (`clip_as_deepspeed`), each rank's BatchNorm statistics its own (no buffer broadcast before a
    forward, only DDP's at set-up, when the ranks' are equal: the group averages them where the
    engine's does, `Algorithm.sync_norm_statistics`). DDP needs a
    gradient for every parameter in every update (the engine would reduce zeros)."""

    def __init__(self, cfg: RunConfig, topo: Topology, model: nn.Module):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        hook = {"fp32": default_hooks.allreduce_hook, "bf16": default_hooks.bf16_compress_hook,
                "fp16": default_hooks.fp16_compress_hook}[cfg.train.precision]
        mb = cfg.parallel.ddp_bucket_mb
        self.ranks = topo.ranks_per_model
        super().__init__(cfg, model, topo.dp_group, topo.dp_group, hook, forward_sync_buffers=False,
                         **({} if mb is None else {"bucket_cap_mb": mb}))

    def clip(self) -> None:
        clip_as_deepspeed(self.model, self.grad_clip, self.group, self.ranks)


def rebuilt_buckets(ddp) -> list[list[int]]:
    """The parameter indices of each bucket of `ddp` as it rebuilt them, in reduction order, from
    its logging data ("5 4 3 2, 0 1"); none before its rebuild. DDP logs in a forward just before it
    rebuilds (update 2's), so after update 2 the log is refreshed first. Checkpointed at update 1
    (DDP rebuilds before the next forward), a resumed run's update 2 runs on the first layout: a
    plain all-reduce still, since torch asks start_powerSGD_iter > 1."""
    data = ddp._get_ddp_logging_data()
    if ddp._has_rebuilt_buckets and not data.get("has_rebuilt_buckets"):
        ddp.logger.set_runtime_stats_and_log()
        data = ddp._get_ddp_logging_data()
    if not data.get("has_rebuilt_buckets"):
        return []
    return [[int(i) for i in bucket.split()] for bucket in data["rebuilt_per_bucket_param_indices"].split(",")]


@contextmanager
def bucket_layout(buckets: list[list[int]]):
    """DDP built within starts with `buckets` (lists of parameter indices, in reduction order): its
    constructor asks `dist._compute_bucket_assignment_by_size` for its first layout and hands the
    reducer that list reversed, so the saved one is given reversed. The size limits only label
    the buckets (the layout is given); the rebuild keeps its own."""
    assign = dist._compute_bucket_assignment_by_size

    def saved(tensors, limits, *rest):
        return [list(b) for b in reversed(buckets)], [limits[-1]] * len(buckets)
    dist._compute_bucket_assignment_by_size = saved
    try:
        yield
    finally:
        dist._compute_bucket_assignment_by_size = assign
