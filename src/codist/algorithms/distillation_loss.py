"""Distillation losses between a student's logits and teachers' soft predictions.

`kl`: KL(teacher || student) on temperature-softened distributions, times T^2 so the
gradient's scale does not change with T (Hinton et al. 2015). `soft_ce`: cross-entropy
of the student against the teacher's soft labels, also times T^2; it equals `kl` plus the
teacher's entropy, a constant in the student, so both give the same gradient, but the
value of `soft_ce` is not zero when student == teacher. Anil et al. call their term a
cross-entropy against the teachers' predictions; Sodhani et al. and DML use KL.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def teacher_probs(teacher_logits: list[torch.Tensor], temperature: float) -> torch.Tensor:
    """Mean of the teachers' softened predictions (Anil: the mean of the other models)."""
    return torch.stack([F.softmax(t.detach().float() / temperature, dim=-1) for t in teacher_logits]).mean(0)


def distill_loss(student_logits: torch.Tensor, target_probs: torch.Tensor, temperature: float = 1.0,
                 kind: str = "kl", mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the batch (over positions where `mask` is 1, e.g. not padding) of the
    distillation term; `target_probs` carry no gradient. Computed in fp32 whatever the inputs'
    dtype (bf16 logits of a mixed-precision run: a 16-bit softmax and log would lose the small
    probabilities the term is about)."""
    log_p = F.log_softmax(student_logits.float() / temperature, dim=-1)
    q = target_probs.detach().float()
    if kind == "kl":
        per_sample = (q * (torch.log(q.clamp_min(1e-12)) - log_p)).sum(-1)
    elif kind == "soft_ce":
        per_sample = -(q * log_p).sum(-1)
    else:
        raise ValueError(f"distillation loss {kind!r}: allowed 'kl', 'soft_ce'")
    if mask is None:
        return per_sample.mean() * temperature ** 2
    mask = mask.to(per_sample.dtype)
    return (per_sample * mask).sum() / mask.sum().clamp_min(1) * temperature ** 2
