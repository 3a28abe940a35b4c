"""The distillation term: zero gradient at agreement, temperature as documented."""
import math

import pytest
import torch
import torch.nn.functional as F

from codist.algorithms.distillation_loss import distill_loss, teacher_probs


@pytest.mark.parametrize("kind", ["kl", "soft_ce"])
@pytest.mark.parametrize("T", [1.0, 4.0])
def test_zero_gradient_when_student_equals_teacher(kind, T):
    z = torch.randn(8, 10, requires_grad=True)
    target = teacher_probs([z.detach().clone()], T)
    distill_loss(z, target, T, kind).backward()
    assert z.grad.abs().max() < 1e-6


def test_gradient_nonzero_when_they_differ():
    z = torch.randn(8, 10, requires_grad=True)
    distill_loss(z, teacher_probs([torch.randn(8, 10)], 2.0), 2.0).backward()
    assert z.grad.abs().max() > 1e-3


def test_kl_value_is_T_squared_times_kl_of_softened_distributions():
    s, t, T = torch.randn(16, 5), torch.randn(16, 5), 3.0
    q = F.softmax(t / T, -1)
    expected = F.kl_div(F.log_softmax(s / T, -1), q, reduction="batchmean") * T * T
    torch.testing.assert_close(distill_loss(s, teacher_probs([t], T), T, "kl"), expected)
    assert float(distill_loss(t, teacher_probs([t], T), T, "kl")) == pytest.approx(0, abs=1e-6)


def test_soft_ce_is_kl_plus_teacher_entropy():
    s, t, T = torch.randn(16, 5), torch.randn(16, 5), 2.0
    q = teacher_probs([t], T)
    entropy = -(q * q.log()).sum(-1).mean() * T * T
    torch.testing.assert_close(distill_loss(s, q, T, "soft_ce"), distill_loss(s, q, T, "kl") + entropy)


def test_higher_temperature_softens_teacher():
    t = torch.randn(4, 10) * 3
    ent = lambda p: float(-(p * p.log()).sum(-1).mean())
    assert ent(teacher_probs([t], 1.0)) < ent(teacher_probs([t], 4.0)) < ent(teacher_probs([t], 16.0))


def test_teacher_probs_is_mean_of_teachers():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(teacher_probs([a, b], 1.0), (F.softmax(a, -1) + F.softmax(b, -1)) / 2)


def test_unknown_kind_rejected():
    with pytest.raises(ValueError, match="allowed 'kl', 'soft_ce'"):
        distill_loss(torch.zeros(1, 2), torch.full((1, 2), 0.5), 1.0, "mse")


def test_mask_averages_over_real_positions_only():
    s, t = torch.randn(2, 5, 7), torch.randn(2, 5, 7)
    q = teacher_probs([t], 1.0)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    per_pos = distill_loss(s[mask], q[mask], 1.0)          # the real positions alone
    torch.testing.assert_close(distill_loss(s, q, 1.0, mask=mask), per_pos)
    # padding positions cannot move the value
    s2 = s.clone()
    s2[0, 3:] = 100.0
    torch.testing.assert_close(distill_loss(s2, q, 1.0, mask=mask), per_pos)


def test_kl_against_a_one_hot_teacher_is_the_students_log_loss():
    # q = (0, 1, 0): 0 log 0 counts as 0, so KL = -log p_student(1), times T^2; T = 2: logits / 2 = (0, 1, 2)
    s = torch.tensor([[0.0, 2.0, 4.0]])
    q = torch.tensor([[0.0, 1.0, 0.0]])
    p1 = math.exp(1) / (1 + math.exp(1) + math.exp(2))
    assert float(distill_loss(s, q, 2.0, "kl")) == pytest.approx(-math.log(p1) * 4, rel=1e-6)


def test_masked_loss_at_a_temperature_by_hand():
    s, t, T = torch.randn(2, 3, 5), torch.randn(2, 3, 5), 2.0
    q = F.softmax(t / T, -1)
    mask = torch.tensor([[1, 0, 1], [0, 0, 1]])
    real = mask.bool()
    expected = F.kl_div(F.log_softmax(s[real] / T, -1), q[real], reduction="batchmean") * T * T   # 3 real positions
    torch.testing.assert_close(distill_loss(s, q, T, "kl", mask=mask), expected)
    one = torch.tensor([[0, 0, 0], [0, 1, 0]])                                                   # a single position
    expected = F.kl_div(F.log_softmax(s[1, 1] / T, -1), q[1, 1], reduction="sum") * T * T
    torch.testing.assert_close(distill_loss(s, q, T, "kl", mask=one), expected)


def test_an_all_padding_batch_has_zero_loss():
    s, q = torch.randn(2, 3, 5), F.softmax(torch.randn(2, 3, 5), -1)
    assert float(distill_loss(s, q, 1.0, mask=torch.zeros(2, 3))) == 0.0


def test_the_default_temperature_is_one():
    s, t = torch.randn(6, 4), torch.randn(6, 4)
    q = F.softmax(t, -1)
    torch.testing.assert_close(distill_loss(s, q), F.kl_div(F.log_softmax(s, -1), q, reduction="batchmean"))


def test_sequences_are_softened_and_summed_over_the_vocabulary():
    # (batch 2, positions 3, vocabulary 4): the last axis is the distribution, not the positions
    s, t = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    q = teacher_probs([t], 2.0)
    torch.testing.assert_close(q, F.softmax(t / 2.0, -1))
    expected = -(q * F.log_softmax(s / 2.0, -1)).sum(-1).mean() * 4.0
    torch.testing.assert_close(distill_loss(s, q, 2.0, "soft_ce"), expected)
