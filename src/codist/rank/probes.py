"""Probes: measurements of a local model beyond the task's metrics, logged in its metrics rows
only when the run config asks for them (`train.probes`). The experiments plan asks for a probe
for the runs of every figure that plots it (workflows/experiments.py)."""
from __future__ import annotations

import torch


class InitDistance:
    """L2 distance of this rank's model from its initialisation (Sodhani et al. 2020, Fig. 1).
    The initialisation is rebuilt from the model's seed, so a resumed run has it too."""

    def __init__(self, algo):
        self.algo = algo
        self.init_params = algo.initial_parameters()

    @torch.no_grad()
    def __call__(self) -> float:
        now = list(self.algo.model.parameters())
        return float(sum(((p - p0.to(p.device)) ** 2).sum() for p, p0 in zip(now, self.init_params)) ** 0.5)


# name (as in `train.probes` and the metrics rows) -> class taking the algorithm
PROBES = {"init_distance": InitDistance}


def build_probes(names, algo) -> dict:
    return {name: PROBES[name](algo) for name in names}
