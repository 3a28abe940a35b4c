"""Extra baselines from torch.distributed's own toolbox, on torch DDP instead of DeepSpeed:
PowerSGD gradient compression and post-local SGD. DDP's built-in C++ all-reduce would bypass
the meter; both baselines register a Python comm hook, whose collectives the meter counts."""
from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from ..data import to_device
from ..optim import build_optimizer, build_scheduler
from .base import Algorithm


class DDPAlgorithm(Algorithm):
    def ddp_group(self):
        return self.topo.dp_group

    def register_hook(self, ddp: DistributedDataParallel) -> None:
        """Subclasses register their Python comm hook (the meter cannot see DDP's C++ all-reduce)."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        ddp.register_comm_hook(self.topo.dp_group, allreduce_hook)

    def setup(self) -> None:
        torch.manual_seed(self.model_seed())
        self.model = self.new_model()
        with self.meter.category("setup"):
            self.ddp = DistributedDataParallel(self.model, process_group=self.ddp_group())
        self.register_hook(self.ddp)
        self.optimizer = build_optimizer(self.model.parameters(), self.cfg.optimizer)
        self.scheduler = build_scheduler(self.optimizer, self.cfg.schedule, self.cfg.train.steps)

    def train_step(self, step: int, batch) -> float:
        x, y = to_device(batch, self.ctx.device)
        self.before_step(step, x, y)
        with self.meter.category("grad_allreduce"):
            loss = self.loss(step, x, y, self.forward(self.ddp, x))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        if self.cfg.optimizer.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.optimizer.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.after_step(step)
        task, self.last_distill = self.split_losses(loss)
        return task


class PowerSGD(DDPAlgorithm):
    def register_hook(self, ddp) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        a = self.cfg.algorithm
        self.powersgd_state = psgd.PowerSGDState(
            process_group=self.topo.dp_group, matrix_approximation_rank=a.rank, start_powerSGD_iter=a.start_iter,
            min_compression_rate=a.min_compression_rate, use_error_feedback=a.error_feedback,
            warm_start=a.warm_start, random_seed=self.cfg.seed)
        ddp.register_comm_hook(self.powersgd_state, psgd.powerSGD_hook)

    _TENSOR_DICTS = ("error_dict", "p_memory_dict", "q_memory_dict")

    def checkpoint_state(self) -> dict:
        s = self.powersgd_state
        kind, keys, pos, has_gauss, gauss = s.rng.get_state()
        return {**super().checkpoint_state(), "powersgd_iter": s.iter,
                "powersgd_rng": {"keys": torch.from_numpy(keys.astype("int64")), "pos": pos,
                                 "has_gauss": has_gauss, "gauss": gauss},
                **{name: dict(getattr(s, name)) for name in self._TENSOR_DICTS}}

    def load_checkpoint_state(self, state: dict) -> None:
        import numpy as np
        super().load_checkpoint_state(state)
        s = self.powersgd_state
        s.iter = state["powersgd_iter"]
        r = state["powersgd_rng"]
        s.rng.set_state(("MT19937", r["keys"].numpy().astype(np.uint32), r["pos"], r["has_gauss"], r["gauss"]))
        for name in self._TENSOR_DICTS:
            getattr(s, name).clear()
            getattr(s, name).update(state[name])


class PostLocalSGD(DDPAlgorithm):
    shared_init = True

    def ddp_group(self):
        return None   # the world: during warm-up gradients are averaged over every rank

    def register_hook(self, ddp) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (PostLocalSGDState,
                                                                                     post_localSGD_hook)
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        a = self.cfg.algorithm
        state = PostLocalSGDState(process_group=None, subgroup=self.topo.dp_group,
                                  start_localSGD_iter=a.warmup_steps)
        ddp.register_comm_hook(state, post_localSGD_hook)
        self.hook_state = state
        self.averager = PeriodicModelAverager(period=a.tau, warmup_steps=a.warmup_steps)

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "hook_iter": self.hook_state.iter, "averager_step": self.averager.step}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.hook_state.iter, self.averager.step = state["hook_iter"], state["averager_step"]

    def after_step(self, step: int) -> None:
        with self.meter.category("model_average"):
            self.averager.average_parameters(self.model.parameters())
