"""Batches for each rank from a finite map-style dataset.

The order is one seeded permutation per epoch, shared by the ranks that train the same
model; global batch i is positions [i*m*b, (i+1)*m*b) of it and rank j of the model's
group takes the j-th slice of b. So m ranks with batch b see exactly the samples that
one rank with batch m*b sees, in the same order. Incomplete batches at the end of an
epoch are dropped (every update has the same size). Evaluation reads strided shards
(`eval_batches`); items that must be decoded (an ImageFolder's JPEGs) come from DataLoader worker
processes there as in training (`PrefetchStream`), when the workload has `loader_workers`.
"""
from __future__ import annotations

import signal

import numpy as np
import torch
from torch.utils.data import Dataset, Subset, TensorDataset
from torch.utils.data._utils.collate import default_collate

from .cuda_defaults import pin_memory


class BatchStream:
    def __init__(self, dataset: Dataset, batch_per_rank: int, ranks: int, rank: int, seed: int):
        self.dataset = dataset
        self.b, self.m, self.j, self.seed = batch_per_rank, ranks, rank, seed
        self.global_batch = batch_per_rank * ranks
        self.batches_per_epoch = len(dataset) // self.global_batch
        self._epoch, self._perm = None, None
        if self.batches_per_epoch == 0:
            raise ValueError(f"global batch {self.global_batch} (train.batch_per_rank={batch_per_rank} x "
                             f"{ranks} ranks) is larger than the training set ({len(dataset)} samples)")

    def indices(self, step: int) -> torch.Tensor:
        """Dataset indices of this rank's batch for update `step` (0-based); pure in step."""
        epoch, i = divmod(step, self.batches_per_epoch)
        if self._epoch != epoch:  # one permutation per epoch, drawn once
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm, self._epoch = torch.randperm(len(self.dataset), generator=g), epoch
        perm = self._perm
        start = i * self.global_batch + self.j * self.b
        return perm[start:start + self.b]

    def batch(self, step: int):
        idx = self.indices(step)
        if isinstance(self.dataset, TensorDataset):
            return tuple(t[idx] for t in self.dataset.tensors)
        whole, idx = batched_source(self.dataset, idx)
        if whole is not None:   # the same items as one at a time, built as one batch
            return whole.batch(idx)
        return default_collate([self.dataset[int(k)] for k in idx])


def batched_source(dataset: Dataset, idx: torch.Tensor) -> tuple[Dataset | None, torch.Tensor]:
    """(the dataset that builds a whole batch itself, the indices into it) when `dataset` or the one a
    Subset of it wraps has a `batch(indices)` method equal to collating its items one at a time
    (workloads.cifar.RandomCropFlip); (None, idx) otherwise."""
    if isinstance(dataset, Subset) and hasattr(dataset.dataset, "batch"):
        return dataset.dataset, torch.as_tensor(dataset.indices)[idx]
    return (dataset, idx) if hasattr(dataset, "batch") else (None, idx)


def shard_indices(n: int, ranks: int, rank: int) -> range:
    """Evaluation shard of rank `rank` of `ranks`: a strided slice, all samples covered once."""
    return range(rank, n, ranks)


def evaluation_slice(dataset: Dataset, size: int) -> Dataset:
    """`size` examples of `dataset`, evenly spaced over it (an ImageFolder's classes stay spread
    out); the whole set when `size` is 0 or not smaller."""
    n = len(dataset)
    if size == 0 or size >= n:
        return dataset
    idx = [i * n // size for i in range(size)]
    if isinstance(dataset, TensorDataset):
        return TensorDataset(*(t[idx] for t in dataset.tensors))
    return Subset(dataset, idx)


def eval_batches(dataset: Dataset, ranks: int, rank: int, batch: int, workers: int = 0):
    """Rank `rank`'s shard of `dataset` in batches of `batch`, in shard order. A TensorDataset is
    indexed whole; other items are collated, by `workers` DataLoader processes when > 0 (an
    ImageFolder's JPEGs decoded off the rank's thread, as its training batches are: the same
    batches, in the same order), else in this thread."""
    idx = list(shard_indices(len(dataset), ranks, rank))
    chunks = [idx[s:s + batch] for s in range(0, len(idx), batch)]
    if isinstance(dataset, TensorDataset):
        for chunk in chunks:
            t = torch.tensor(chunk)
            yield tuple(x[t] for x in dataset.tensors)
    elif workers > 0 and chunks:
        yield from torch.utils.data.DataLoader(dataset, batch_sampler=chunks, num_workers=workers,
                                               worker_init_fn=_worker_ignores_stop_signals,
                                               pin_memory=pin_memory())
    else:
        for chunk in chunks:
            yield default_collate([dataset[k] for k in chunk])


def model_data(dataset: Dataset, kind: str, model: int, models: int, seed: int) -> tuple[Dataset, int]:
    """Training data of model `model` of `models`, and the seed of its order.

    `same`: every model the same batches; `shuffled`: the whole set in its own order;
    `disjoint`: its own part of a fixed random partition of the set into `models` parts.
    """
    if kind == "same":
        return dataset, seed
    if kind == "shuffled":
        return dataset, seed * 7919 + 1 + model
    if kind != "disjoint":
        raise ValueError(f"data split {kind!r}: allowed 'same', 'shuffled', 'disjoint'")
    g = torch.Generator().manual_seed(seed * 7919)
    part = torch.randperm(len(dataset), generator=g)[model::models]
    if isinstance(dataset, TensorDataset):
        return TensorDataset(*(t[part] for t in dataset.tensors)), seed
    return Subset(dataset, part.tolist()), seed


def to_device(obj, device: torch.device):
    """Tensors, or tuples/lists/dicts of them, moved to `device`."""
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def seed_rank_streams(seed: int, model: int, dp_rank: int, shared_init: bool = False) -> None:
    """Make the global RNG from here on this rank's own: random augmentation in the main process,
    dropout, and the loader workers' seeds (DataLoader draws them from it). The ranks of a model's
    group leave set-up with one state (they built the same model from its seed), so they would crop,
    flip and drop out alike: rank j > 0 is reseeded from (seed, model, j); rank 0 keeps its stream,
    the one every rank had before, so groups of one rank train as they did. With one shared
    initialisation (`shared_init`: MA-DNN, EC-DNN, DiLoCo) every group left with the same state, so
    rank 0 of model i > 0 is reseeded too."""
    if dp_rank or (shared_init and model):
        torch.manual_seed(int(np.random.SeedSequence([seed, model, dp_rank]).generate_state(1)[0]))


class _Steps(torch.utils.data.Sampler):
    """Batch sampler yielding the index lists of updates start, start+1, ... of a BatchStream."""

    def __init__(self, stream: BatchStream, start: int):
        self.stream, self.start = stream, start

    def __iter__(self):
        step = self.start
        while True:
            yield self.stream.indices(step).tolist()
            step += 1


def _worker_ignores_stop_signals(worker_id: int) -> None:
    """DataLoader workers leave stopping to their rank: SLURM signals every process of a step, and a
    worker killed by SIGTERM (torch's worker handler ends it) or SIGUSR1 would fail the rank's next
    batch before it checkpoints. The rank stops them when it closes its loader (a worker stuck in I/O
    no longer yields to the loader's SIGTERM there: the launcher's or SLURM's SIGKILL ends it)."""
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


class PrefetchStream:
    """A BatchStream served by DataLoader worker processes (decoding and augmenting real
    images off the training thread). batch(step) is still the same samples for the same step;
    only random augmentation inside the workers is not reproduced exactly after a resume."""

    def __init__(self, stream: BatchStream, workers: int):
        self.stream, self.workers = stream, workers
        self._iter, self._next = None, None

    def batch(self, step: int):
        if self._iter is None or step != self._next:
            loader = torch.utils.data.DataLoader(self.stream.dataset, batch_sampler=_Steps(self.stream, step),
                                                 num_workers=self.workers, persistent_workers=False,
                                                 prefetch_factor=2 if self.workers else None,
                                                 worker_init_fn=_worker_ignores_stop_signals,
                                                 pin_memory=pin_memory())   # with a GPU: async copies
            self._iter = iter(loader)
        self._next = step + 1
        return next(self._iter)
