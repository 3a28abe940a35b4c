"""A toy algorithm, written as a newcomer would add one: this module is all it takes (config
class, strategy, one registration). Every `every` updates model 0's parameters replace the
other models' (a broadcast through the communication meter). Used by test_algorithm_plugins.py,
in-process and, through CODIST_PLUGINS, in a real run's processes."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from codist.algorithms import register
from codist.algorithms.base import Algorithm
from codist.algorithms.sections import AlgorithmSection
from codist.algorithms.state import flat_state, load_flat_state


class ToyConfig(AlgorithmSection):
    name: Literal["toy_broadcast"] = "toy_broadcast"
    every: StrictInt = Field(2, ge=1, description="updates between broadcasts of model 0")
    data: Literal["disjoint", "same"] = "disjoint"


class ToyBroadcast(Algorithm):
    shared_init = True

    def after_step(self, step: int) -> None:
        if (step + 1) % self.cfg.algorithm.every:
            return
        flat = flat_state(self.model)
        self.meter.broadcast(flat, src=self.topo.dp_rank, group=self.topo.cross_group, category="param_exchange")
        load_flat_state(self.model, flat)


register("toy_broadcast", ToyConfig, ToyBroadcast, min_models=2, period="every", extra_models=())
