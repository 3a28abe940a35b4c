"""Extra baselines from torch.distributed's own toolbox, on torch DDP instead of DeepSpeed
(`updates.DDPUpdate`): PowerSGD gradient compression and post-local SGD, each through its
Python comm hook. Their checkpoints carry DDP's bucket layout, which a resumed run restores
(`updates.DDPUpdate.buckets`); PowerSGD on gloo reduces the whole model in one bucket (`PowerSGD.ddp_options`)."""
from __future__ import annotations

import torch
import torch.distributed as dist

from .base import Algorithm
from .updates import DDPUpdate


class DDPAlgorithm(Algorithm):
    """Updates through torch DDP over `ddp_group()` with the comm hook of `comm_hook()`."""

    def ddp_group(self):
        return self.topo.dp_group

    def comm_hook(self):
        """(state, hook) for DDP's register_comm_hook; plain all-reduce by default."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        return self.topo.dp_group, allreduce_hook

    def ddp_options(self, model) -> dict:
        """DistributedDataParallel's keyword arguments for `model` (none: DDP's defaults)."""
        return {}

    def build_update(self, model):
        # its bucket layout is checkpointed and restored by Algorithm's checkpoint state (`DDPUpdate.buckets`)
        return DDPUpdate(self.cfg, model, self.ddp_group(), *self.comm_hook(), **self.ddp_options(model))


class PowerSGD(DDPAlgorithm):
    def comm_hook(self):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        a = self.cfg.algorithm
        self.powersgd_state = psgd.PowerSGDState(
            process_group=self.topo.dp_group, matrix_approximation_rank=a.rank, start_powerSGD_iter=a.start_iter,
            min_compression_rate=a.min_compression_rate, use_error_feedback=a.error_feedback,
            warm_start=a.warm_start, random_seed=self.cfg.seed)
        return self.powersgd_state, psgd.powerSGD_hook

    # torch's PowerSGD hook waits, inside one all-reduce's future callback, for the next all-reduce
    # (pytorch/pytorch#48478, open; the issue says NCCL's futures complete at once). Gloo runs
    # such callbacks on its process group's 2 worker threads: with two buckets in flight both can
    # block so, waiting for all-reduces no free thread will run (a hang, likelier the busier the
    # machine: the suite's hung test), and the all-reduces they issue leave in whichever order the
    # threads get there, which gloo pairs across ranks by order (an abort on sizes, or a hang). One
    # bucket is one chain at a time: on gloo the whole model is reduced in one bucket.
    def ddp_options(self, model) -> dict:
        if dist.get_backend(self.ddp_group()) != "gloo":
            return {}
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
        return {"bucket_cap_mb": grad_bytes / 2**20 + 1}

    # P and Q are all-reduced, so the same on every rank of the group: with the group's state. The
    # error-feedback residuals are each rank's own (its gradient minus the approximation): per rank.
    _GROUP_DICTS = ("p_memory_dict", "q_memory_dict")

    def checkpoint_state(self) -> dict:
        s = self.powersgd_state
        kind, keys, pos, has_gauss, gauss = s.rng.get_state()
        return {**super().checkpoint_state(), "powersgd_iter": s.iter,
                "powersgd_rng": {"keys": torch.from_numpy(keys.astype("int64")), "pos": pos,
                                 "has_gauss": has_gauss, "gauss": gauss},
                **{name: dict(getattr(s, name)) for name in self._GROUP_DICTS}}

    def load_checkpoint_state(self, state: dict) -> None:
        import numpy as np
        super().load_checkpoint_state(state)
        s = self.powersgd_state
        s.iter = state["powersgd_iter"]
        r = state["powersgd_rng"]
        s.rng.set_state(("MT19937", r["keys"].numpy().astype(np.uint32), r["pos"], r["has_gauss"], r["gauss"]))
        for name in self._GROUP_DICTS:
            self._restore(name, state[name])

    def rank_checkpoint_state(self) -> dict:
        return {**super().rank_checkpoint_state(), "error_dict": dict(self.powersgd_state.error_dict)}

    def load_rank_checkpoint_state(self, state: dict) -> None:
        super().load_rank_checkpoint_state(state)
        self._restore("error_dict", state["error_dict"])

    def _restore(self, name: str, tensors: dict) -> None:
        """A PowerSGD memory from a checkpoint (loaded on the CPU) onto the run's device, where the hook
        computes with it."""
        memory = getattr(self.powersgd_state, name)
        memory.clear()
        memory.update({k: v.to(self.ctx.device) for k, v in tensors.items()})


class PostLocalSGD(DDPAlgorithm):
    shared_init = True

    def ddp_group(self):
        return None   # the world: during warm-up gradients are averaged over every rank

    def comm_hook(self):
        from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (PostLocalSGDState,
                                                                                     post_localSGD_hook)
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        a = self.cfg.algorithm
        self.hook_state = PostLocalSGDState(process_group=None, subgroup=self.topo.dp_group,
                                            start_localSGD_iter=a.warmup_steps)
        self.averager = PeriodicModelAverager(period=a.tau, warmup_steps=a.warmup_steps)
        return self.hook_state, post_localSGD_hook

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "hook_iter": self.hook_state.iter, "averager_step": self.averager.step}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.hook_state.iter, self.averager.step = state["hook_iter"], state["averager_step"]

    def after_step(self, step: int) -> None:
        with self.meter.category("model_average"):
            self.averager.average_parameters(self.model.parameters())
