"""n independently trained models whose outputs are averaged at evaluation (Anil Fig. 2a's
"ensemble of two"). Training is n separate sync data-parallel runs; at each evaluation the
models' states are gathered to the first group (category eval, not training traffic)."""
from __future__ import annotations

import torch
from torch import nn

from .base import Algorithm
from .state import OutputEnsemble, flat_state, frozen, load_flat_state


class Ensemble(Algorithm):
    def setup(self) -> None:
        super().setup()
        self.members = OutputEnsemble([frozen(self.new_model()) for _ in range(self.topo.models)], self.forward)

    def extra_eval_models(self) -> dict[str, nn.Module]:
        mine = flat_state(self.model)
        gathered = [torch.empty_like(mine) for _ in range(self.topo.models)]
        self.meter.all_gather(gathered, mine, group=self.topo.cross_group, category="eval")
        if self.topo.model_index != 0:
            return {}
        for member, flat in zip(self.members.members, gathered):
            load_flat_state(member, flat)
        return {"ensemble": self.members}
