"""The workload interface: model + data + loss + evaluation metric + target.

The training loop knows a workload only through this class. Evaluation is split in
two so it can be sharded over a model's data-parallel group: every rank computes
`eval_sums` on its shard, the loop all-reduces the sums (through the meter), and
`finalize_eval` turns the global sums into metrics.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Dataset


@dataclass(frozen=True)
class Metric:
    name: str                 # column name in metrics.jsonl, e.g. "val_accuracy"
    higher_is_better: bool
    target: float | None = None   # the workload's target at this scale (time-to-target)


class Workload(ABC):
    """One workload at one scale. Built from its validated config section."""

    #: the headline validation metric (summary.json reports its final and best value)
    metric: Metric
    #: size of the output distribution (classes, vocabulary)
    num_classes: int
    #: metrics exact only over the whole validation set (a gap to its known optimum): an evaluation
    #: on a `train.eval_size` slice leaves them out
    whole_set_metrics: tuple[str, ...] = ()
    #: DataLoader worker processes per rank that read and decode its items, for training and
    #: evaluation alike (real images); 0: the rank's own thread (tensors already in memory)
    loader_workers: int = 0

    @abstractmethod
    def build_model(self) -> nn.Module:
        """A freshly initialised model; the caller seeds torch before calling."""

    @abstractmethod
    def train_dataset(self) -> Dataset:
        """The finite training set (map-style); items are (input, target) tensors."""

    @abstractmethod
    def val_dataset(self) -> Dataset:
        """The validation set, disjoint from the training set."""

    def forward(self, model: nn.Module, inputs) -> torch.Tensor:
        """Outputs (logits) of `model` on a batch's inputs; override for models that take
        several inputs (e.g. a translation model's source tokens and lengths)."""
        return model(inputs)

    def train_stream(self, split: str, model: int, models: int, batch_per_rank: int, ranks: int, rank: int,
                     seed: int):
        """This rank's training batches: an object with `.batch(step) -> (inputs, targets)`.

        `split` says how the models share data (`same`, `shuffled`, `disjoint`, see
        `codist.runtime.data.model_data`). The default serves the finite `train_dataset()`; a
        workload that streams fresh data (the LM) overrides this.
        """
        from ..runtime.data import BatchStream, model_data
        data, data_seed = model_data(self.train_dataset(), split, model, models, seed)
        return BatchStream(data, batch_per_rank, ranks, rank, data_seed)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean training loss over the batch (cross-entropy on logits by default)."""
        return nn.functional.cross_entropy(outputs, targets)

    def token_mask(self, targets: torch.Tensor, outputs: torch.Tensor | None = None) -> torch.Tensor | None:
        """Which output positions are real (1) rather than padding (0), shaped like the outputs
        without their last dim; None when every position counts. Distillation terms average
        over the real positions only."""
        return None

    def eval_model_sums(self, model: nn.Module, inputs, targets) -> dict[str, float]:
        """Evaluation statistics of a model on one validation batch. The default scores its
        outputs; a workload whose metric needs the model itself (beam search for BLEU) overrides it."""
        return self.eval_sums(self.forward(model, inputs), targets)

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        """Additive statistics of one validation batch (summed, not averaged)."""
        losses = nn.functional.cross_entropy(outputs, targets, reduction="sum")
        correct = (outputs.argmax(dim=1) == targets).sum()
        return {"loss_sum": float(losses), "correct": float(correct), "count": float(targets.numel())}

    def finalize_eval(self, sums: dict[str, float]) -> dict[str, float]:
        """Metrics from the sums over the whole validation set."""
        n = sums["count"]
        return {"val_loss": sums["loss_sum"] / n, "val_accuracy": sums["correct"] / n}

    def val_predictions(self, model: nn.Module) -> torch.Tensor | None:
        """Per-sample validation predictions the analysis needs beyond the metrics (e.g. CTR
        churn between retrains), written by the run as `val_predictions_<model>.npy`; None: none."""
        return None

    def class_counts(self) -> torch.Tensor:
        """Training-set frequency of each class (the unigram prior of label smoothing)."""
        data = self.train_dataset()
        labels = data.tensors[1] if hasattr(data, "tensors") else torch.tensor([int(y) for _, y in data])
        return torch.bincount(labels.reshape(-1), minlength=self.num_classes)

    def describe(self) -> dict:
        """Facts recorded in the manifest (dataset sizes, parameter count, ...)."""
        model = self.build_model()
        return {
            "train_size": len(self.train_dataset()),
            "val_size": len(self.val_dataset()),
            "parameters": sum(p.numel() for p in model.parameters()),
        }
