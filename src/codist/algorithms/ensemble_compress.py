"""EC-DNN (Sun et al. 2016): K workers train locally; after every tau-th update the global
model G is the equal-weight ensemble of the K local models' outputs. With `compress`, G is
compressed back into each local model during the next local phase through the combined
loss (1 - w) * CE(y, f_i) + w * D(G, f_i), so compression needs no phase of its own;
without it (E-DNN) the local models keep training on labels only and G stays an ensemble.

Every round each worker receives the other K-1 local models (all-gather of their states,
category param_exchange) and runs G's members as frozen teachers on its own batches.
Before the first round there is no G to compress: the first phase is plain local training.
"""
from __future__ import annotations

import torch
from torch import nn

from .distillation_loss import distill_loss
from .base import Algorithm
from .state import OutputEnsemble, flat_state, frozen, load_flat_state


class EnsembleCompress(Algorithm):
    shared_init = True

    def setup(self) -> None:
        super().setup()
        # every member starts as the shared initial model, so G before round 1 is that model
        init = flat_state(self.model)
        members = []
        for _ in range(self.topo.models):
            m = frozen(self.new_model())
            load_flat_state(m, init)
            members.append(m)
        self.global_model = frozen(OutputEnsemble(members, self.forward))
        self.rounds = 0

    def ensemble_round(self) -> None:
        self.sync_norm_statistics("param_exchange")   # the member is the group's model, not one rank's
        mine = flat_state(self.model)
        gathered = [torch.empty_like(mine) for _ in range(self.topo.models)]
        self.meter.all_gather(gathered, mine, group=self.topo.cross_group, category="param_exchange")
        for member, flat in zip(self.global_model.members, gathered):
            load_flat_state(member, flat)
        self.rounds += 1

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "rounds": self.rounds, "global": self.global_model.state_dict()}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.rounds = state["rounds"]
        self.global_model.load_state_dict(state["global"])

    def after_step(self, step: int) -> None:
        if (step + 1) % self.cfg.algorithm.tau == 0:
            self.ensemble_round()

    def loss(self, step, x, y, logits):
        a = self.cfg.algorithm
        ce = self.workload.loss(logits, y)
        if not a.compress or self.rounds == 0:
            return self.objective(ce)
        with torch.no_grad():
            target = torch.softmax(self.global_model(x) / a.temperature, dim=-1)
        mask = self.workload.token_mask(y, logits)
        return self.objective(ce, distill_loss(logits, target, a.temperature, a.loss, mask),
                              1 - a.distill_weight, a.distill_weight)

    def extra_eval_models(self) -> dict[str, nn.Module]:
        return {"G": self.global_model} if self.topo.model_index == 0 else {}
