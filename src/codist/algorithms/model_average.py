"""MA-DNN / local SGD (Sun et al. 2016's baseline): K workers train locally from one shared
start; after every tau-th update their parameters are averaged and the average is every
worker's new start. Buffers (BatchNorm statistics) and optimizer state (momentum, Adam
moments) are averaged too when the config says so; by default buffers are, optimizer state
is not (each worker keeps its own momentum, as in torch's PeriodicModelAverager)."""
from __future__ import annotations

import torch
from torch import nn

from .base import Algorithm
from .state import flat_state, frozen, load_flat_state


class ModelAverage(Algorithm):
    shared_init = True

    def setup(self) -> None:
        super().setup()
        self.rounds = 0
        self._global = frozen(self.new_model()) if self.topo.model_index == 0 else None

    def average(self, flat: torch.Tensor, category: str) -> torch.Tensor:
        """Mean over the K models of a flat tensor (all-reduce over this rank's cross-model group)."""
        self.meter.all_reduce(flat, group=self.topo.cross_group, category=category)
        return flat.div_(self.topo.models)

    def optimizer_state(self) -> list[torch.Tensor]:
        return [v for state in self.optimizer.state.values() for v in state.values()
                if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0]

    def after_step(self, step: int) -> None:
        a = self.cfg.algorithm
        if (step + 1) % a.tau:
            return
        if a.average_buffers:
            self.sync_norm_statistics("model_average")   # inside the group first: one rank's would drift
        load_flat_state(self.model, self.average(flat_state(self.model, a.average_buffers), "model_average"),
                        a.average_buffers)
        if a.average_optimizer_state:
            tensors = self.optimizer_state()
            flat = self.average(torch.cat([t.reshape(-1) for t in tensors]), "model_average")
            torch.nn.utils.vector_to_parameters(flat, tensors)
        self.rounds += 1

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "rounds": self.rounds}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.rounds = state["rounds"]

    def extra_eval_models(self) -> dict[str, nn.Module]:
        """G: the parameter average of the current local models (what the next round would give)."""
        flat = self.average(flat_state(self.model), "eval")
        if self._global is None:
            return {}
        load_flat_state(self._global, flat)
        return {"G": self._global}
