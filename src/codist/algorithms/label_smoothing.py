"""Label smoothing baselines of Anil et al. Fig. 2a: one model, sync data parallel, with the
distillation term replaced by a fixed prior: uniform over classes, or the unigram prior
(class frequencies of the training set). loss = (1 - w) * CE(y, f) + w * CE(prior, f)."""
from __future__ import annotations

import torch

from .distillation_loss import distill_loss
from .base import Algorithm


class LabelSmoothing(Algorithm):
    def setup(self) -> None:
        super().setup()
        a = self.cfg.algorithm
        counts = self.workload.class_counts().double()
        prior = torch.full_like(counts, 1 / len(counts)) if a.prior == "uniform" else counts / counts.sum()
        self.prior = prior.float().to(self.ctx.device)

    def loss(self, step, x, y, logits):
        w = self.cfg.algorithm.weight
        target = self.prior.expand_as(logits)
        mask = self.workload.token_mask(y, logits)
        return self.objective(self.workload.loss(logits, y), distill_loss(logits, target, 1.0, "soft_ce", mask), 1 - w, w)
