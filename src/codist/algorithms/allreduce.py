"""Synchronous data parallel: the DeepSpeed engine all-reduces gradients every update."""
from __future__ import annotations

import torch

from ..engine import build_engine
from .base import Algorithm


class AllReduce(Algorithm):
    def setup(self) -> None:
        torch.manual_seed(self.model_seed())
        model = self.ctx.workload.build_model().to(self.ctx.device)
        with self.ctx.meter.category("setup"):
            self.engine = build_engine(self.ctx.cfg, self.ctx.topo, model)

    def train_step(self, step: int, batch) -> float:
        x, y = (t.to(self.ctx.device, non_blocking=True) for t in batch)
        with self.ctx.meter.category("grad_allreduce"):
            loss = self.ctx.workload.loss(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
        return loss.item()

    def eval_models(self):
        return {str(self.ctx.topo.model_index): self.engine.module}
