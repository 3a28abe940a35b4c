"""algorithms/state.py's promises that no run shows by itself: a frozen teacher builds no graph even
when a caller runs it with gradients on, and an output ensemble's log-probability stays finite where
the members' mean probability underflows float32 (a confidently wrong G would otherwise score an
infinite validation loss)."""
import math

import torch
from torch import nn

from codist.algorithms.state import OutputEnsemble, frozen


class Fixed(nn.Module):
    """Returns the same logits for any input."""

    def __init__(self, logits):
        super().__init__()
        self.logits = nn.Parameter(torch.tensor(logits))

    def forward(self, x):
        return self.logits.expand(len(x), -1)


def test_a_frozen_teacher_is_in_eval_mode_and_builds_no_graph():
    teacher = frozen(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5)))
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    with torch.enable_grad():
        out = teacher(torch.ones(2, 3))
    assert out.grad_fn is None and not out.requires_grad
    torch.testing.assert_close(out, teacher(torch.ones(2, 3)), rtol=0, atol=0)   # no dropout in eval mode


def test_an_ensembles_log_probability_is_finite_where_the_mean_underflows():
    # class 1: e^-200 under each member, 0 in float32; class 0: probability 1
    g = OutputEnsemble([Fixed([0.0, -200.0]), Fixed([0.0, -200.0])])
    out = g(torch.zeros(3, 1))
    assert torch.isfinite(out).all()
    assert out[:, 0].tolist() == [0.0] * 3
    assert out[:, 1].tolist() == [float(torch.tensor(math.log(1e-30)))] * 3   # log of the clamp, 1e-30
    # where nothing underflows it is the log of the mean probability: members (0.5, 0.5) and (0.9, 0.1)
    g = OutputEnsemble([Fixed([0.0, 0.0]), Fixed([math.log(9.0), 0.0])])
    torch.testing.assert_close(g(torch.zeros(1, 1)), torch.log(torch.tensor([[0.7, 0.3]])))


def test_persistent_buffers_are_the_floats_state_dict_saves_each_once_in_order():
    """Skipped, in the order they meet the loop: a None buffer, a non-persistent table, an integer
    counter, a buffer already met (shared between two modules); kept: every float buffer after them."""
    from torch import nn

    from codist.algorithms.state import persistent_buffers

    class Buffers(nn.Module):
        def __init__(self, shared):
            super().__init__()
            self.register_buffer("none", None)
            self.register_buffer("table", torch.ones(2), persistent=False)
            self.register_buffer("count", torch.tensor(0))
            self.register_buffer("shared", shared)
            self.register_buffer("own", torch.zeros(3))
    shared = torch.full((2,), 5.0)
    model = nn.Sequential(Buffers(shared), Buffers(shared))
    assert [id(b) for b in persistent_buffers(model)] == [id(shared), id(model[0].own), id(model[1].own)]
