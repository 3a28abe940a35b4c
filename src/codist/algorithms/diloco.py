"""DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language
Models"): K workers start from one shared model theta; each takes tau (H) steps of the run's
optimizer (inner, local state kept), then

    delta = theta - mean_k theta_k                (the averaged pseudo-gradient: one all-reduce)
    b     = mu * b + delta                        (outer momentum, b = 0 at the start)
    theta = theta - lr * (delta + mu * b)         (Nesterov; plain momentum: theta - lr * b)

and every worker continues from the new theta. The all-reduce carries the workers' parameters
(and buffers), like model_average's, under the same meter category; the mean of the parameters
gives the mean pseudo-gradient since theta is the same on every worker. The update is computed as
mean + (1 - lr) * delta - lr * mu * b, which is the mean itself, bit for bit, at lr 1, mu 0."""
from __future__ import annotations

import torch
from torch import nn

from .base import Algorithm
from .state import flat_state, frozen, load_flat_state


def outer_step(start: torch.Tensor, mean: torch.Tensor, momentum: torch.Tensor, lr: float, mu: float,
               nesterov: bool) -> torch.Tensor:
    """The new shared parameters from the start of the round and the workers' mean; updates the
    outer momentum buffer `momentum` in place (torch.optim.SGD's rule, dampening 0)."""
    delta = start - mean
    previous = momentum.clone() if mu and not nesterov else None
    momentum.mul_(mu).add_(delta)
    new = mean.clone()
    if lr != 1:
        new.add_(delta, alpha=1 - lr)
    if mu:
        new.add_(momentum if nesterov else previous, alpha=-lr * mu)
    return new


class Diloco(Algorithm):
    shared_init = True

    def setup(self) -> None:
        super().setup()
        self.rounds = 0
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.start = flat_state(self.model, buffers=False).clone()   # theta: the same on every worker
        self.momentum = torch.zeros_like(self.start)
        self.in_round = False   # inner steps taken since the last outer step
        self._global = frozen(self.new_model()) if self.topo.model_index == 0 else None

    def after_step(self, step: int) -> None:
        a = self.cfg.algorithm
        self.in_round = bool((step + 1) % a.tau)
        if self.in_round:
            return
        if a.average_buffers:
            self.sync_norm_statistics("model_average")   # inside the group first: one rank's would drift
        flat = flat_state(self.model, a.average_buffers)
        self.meter.all_reduce(flat, group=self.topo.cross_group, category="model_average")
        flat.div_(self.topo.models)
        flat[:self.n_params] = outer_step(self.start, flat[:self.n_params], self.momentum, a.outer_lr,
                                          a.outer_momentum, a.outer_nesterov)
        load_flat_state(self.model, flat, a.average_buffers)
        self.start = flat[:self.n_params].clone()
        self.rounds += 1

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "rounds": self.rounds, "outer_start": self.start,
                "outer_momentum": self.momentum, "in_round": self.in_round}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.rounds = state["rounds"]
        self.start.copy_(state["outer_start"])
        self.momentum.copy_(state["outer_momentum"])
        self.in_round = state["in_round"]

    def extra_eval_models(self) -> dict[str, nn.Module]:
        """G: the shared model. Right after an outer step that is the workers' start; mid-round, the
        model an outer step now would give (as model_average's G, the workers' mean, which it is
        at lr 1, mu 0). Buffers averaged. Evaluation traffic; the training state is unchanged."""
        a = self.cfg.algorithm
        flat = flat_state(self.model)
        self.meter.all_reduce(flat, group=self.topo.cross_group, category="eval")
        flat.div_(self.topo.models)
        if self._global is None:
            return {}
        if self.in_round:
            flat[:self.n_params] = outer_step(self.start, flat[:self.n_params], self.momentum.clone(), a.outer_lr,
                                              a.outer_momentum, a.outer_nesterov)
        else:   # no inner step since the outer step (a second one would apply the momentum again)
            flat[:self.n_params] = self.start
        load_flat_state(self._global, flat)
        return {"G": self._global}
