"""Model state as one flat vector (what goes over the wire), frozen copies, output ensembles."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def state_tensors(model: nn.Module, buffers: bool = True) -> list[torch.Tensor]:
    """Parameters, then the persistent floating-point buffers (BatchNorm running statistics) if
    `buffers`: what the model's state_dict holds. Non-persistent buffers are constants every rank
    builds itself (fairseq's sinusoidal position tables: 2 x 1,026 x 1,024 floats of Transformer-big,
    8.4 MB an exchange), so they are not sent."""
    out = [p.data for p in model.parameters()]
    if buffers:
        out += persistent_buffers(model)
    return out


def persistent_buffers(model: nn.Module) -> list[torch.Tensor]:
    """The floating-point buffers state_dict() saves, each once, in model.buffers()'s order."""
    seen, out = set(), []
    for m in model.modules():
        for name, b in m._buffers.items():
            if b is None or name in m._non_persistent_buffers_set or not b.is_floating_point() or id(b) in seen:
                continue
            seen.add(id(b))
            out.append(b)
    return out


def norm_statistics(model: nn.Module) -> list[torch.Tensor]:
    """The running statistics of the model's normalisation layers (BatchNorm's running mean and
    variance), not their batch counters, nor other buffers (an LM's carried hidden state is each
    rank's own)."""
    return [b for m in model.modules() if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats
            for b in (m.running_mean, m.running_var) if b is not None]


def flat_state(model: nn.Module, buffers: bool = True) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in state_tensors(model, buffers)])


def load_flat_state(model: nn.Module, flat: torch.Tensor, buffers: bool = True) -> None:
    offset = 0
    for t in state_tensors(model, buffers):
        t.copy_(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    if offset != flat.numel():
        raise ValueError(f"flat state has {flat.numel()} values, the model {offset}")


def frozen(model: nn.Module) -> nn.Module:
    """A teacher: evaluation mode, no gradients."""
    model.eval()
    model.requires_grad_(False)
    return model


class OutputEnsemble(nn.Module):
    """Equal-weight average of the members' predicted distributions, returned as log-probabilities
    so that cross-entropy and argmax on its output score the ensemble (Sun et al.'s global model).
    `forward_fn(model, inputs)` is the workload's forward (models may take several inputs)."""

    def __init__(self, members: list[nn.Module], forward_fn=None):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.forward_fn = forward_fn or (lambda model, inputs: model(inputs))

    def forward(self, x) -> torch.Tensor:
        # in fp32, whatever dtype the members' outputs have
        probs = torch.stack([F.softmax(self.forward_fn(m, x).float(), dim=-1) for m in self.members]).mean(0)
        return torch.log(probs.clamp_min(1e-30))
