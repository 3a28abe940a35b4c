"""The algorithm interface: a small strategy over the one training loop in `codist.train`."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn

from ..comm import CommMeter
from ..config import RunConfig
from ..distributed import Topology
from ..workloads import Workload


@dataclass
class TrainContext:
    cfg: RunConfig
    topo: Topology
    meter: CommMeter
    workload: Workload
    device: torch.device


class Algorithm(ABC):
    def __init__(self, ctx: TrainContext):
        self.ctx = ctx

    @abstractmethod
    def setup(self) -> None:
        """Build this rank's model(s) and engine(s); runs once, before the first step."""

    @abstractmethod
    def train_step(self, step: int, batch) -> float:
        """One update on this rank's batch; returns this rank's training loss."""

    @abstractmethod
    def eval_models(self) -> dict[str, nn.Module]:
        """The models this rank helps evaluate, by name (every rank of a group returns the same names)."""

    def eval_names(self) -> list[str]:
        """Every model name evaluated anywhere in the job, in a fixed order."""
        return [str(i) for i in range(self.ctx.topo.models)]

    def data_seed(self) -> int:
        """Seed of this rank's data order; ranks of one model share it."""
        return self.ctx.cfg.seed

    def model_seed(self) -> int:
        """Seed of this rank's model initialisation; ranks of one model share it."""
        return self.ctx.cfg.seed * 1009 + self.ctx.topo.model_index
