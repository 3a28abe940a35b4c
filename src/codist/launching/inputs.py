"""Before any process starts: every file or folder a run config names exists and is readable, and
a model's batch fits in its training set where the config alone sets that set's size.

`codist check` and `codist run` call `check_inputs(cfg)`, so a wrong `workload.data_dir` is one
line naming the key and the path, not a traceback from every rank after launch. Only the
presence and readability of the paths each workload's registration names (`data_needs`) are
checked here (cheap, no torch); the loaders check the files' contents (dtype, shape, range) when
they read them. The batch is checked against an embedded data set's size (`check_batch`: its
`train_size`, translation's `pairs`); a real data set's size is known only to its reader, which
refuses a too large batch in the ranks.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..config import ConfigError, RunConfig
from ..data_root import workload_with_data
from ..workloads import spec as workload_spec


def _check(key: str, path: Path, folder: bool, layout: str) -> None:
    kind = "folder" if folder else "file"
    if not path.exists():
        raise ConfigError(f"{key}: {str(path)!r} does not exist; expected {layout}")
    if folder != path.is_dir():
        raise ConfigError(f"{key}: {str(path)!r} is not a {kind}; expected {layout}")
    if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
        raise ConfigError(f"{key}: {str(path)!r}: this user may not read the {kind}")


def check_inputs(cfg: RunConfig) -> None:
    """Raise ConfigError (one line: the key, the path, what is expected) if a data folder or file
    the config names is missing, of the wrong kind or unreadable. Embedded data sets need none.
    A relative data_dir is checked where the data root puts it (codist.data_root)."""
    check_batch(cfg)
    w = workload_with_data(cfg)
    if getattr(w, "tokenizer_model", None):
        _check("workload.tokenizer_model", Path(w.tokenizer_model), False, "a SentencePiece .model file")
    data_dir = getattr(w, "data_dir", None)
    if data_dir is None:
        return
    root = Path(data_dir)
    needs = workload_spec(w.name).data_needs   # what the workload's registration says its data set needs
    if needs is None:
        return
    folders, files, layout, problem = needs(w, root)
    for path, folder in [(root, True)] + [(p, True) for p in folders] + [(p, False) for p in files]:
        _check("workload.data_dir", path, folder, layout)
    if problem:
        raise ConfigError(problem)


#: the keys that set an embedded training set's size: its samples (`train_size`: cifar, imagenet, ctr) or,
#: for translation, its sentence pairs (`pairs`; those with a side longer than max_len are dropped, so
#: the set holds at most that). The embedded language model has none: its stream is endless, and its
#: batch is bounded by memory instead (codist.launching.launch.check_memory).
SIZE_KEYS = ("train_size", "pairs")


def check_batch(cfg: RunConfig) -> None:
    """A model's global batch (batch_per_rank x its ranks) must fit in the training data it draws from
    (codist.runtime.data.BatchStream), or every rank fails after launch: checked where the config alone
    sets the size, an embedded data set's SIZE_KEYS (a disjoint split gives each model its
    n // models part)."""
    w, b, ranks, models = cfg.workload, cfg.train.batch_per_rank, cfg.parallel.ranks_per_model, cfg.parallel.models
    key = next((k for k in SIZE_KEYS if isinstance(getattr(w, k, None), int)), None)
    if getattr(w, "dataset", None) != "embedded" or key is None:
        return
    size = getattr(w, key)
    disjoint = cfg.algorithm.model_data() == "disjoint"
    part = size // models if disjoint else size
    if b * ranks > part:
        where = (f"each model's part of workload.{key}={size} split disjoint over parallel.models={models}"
                 if disjoint else f"workload.{key}={size}")
        raise ConfigError(f"train.batch_per_rank={b} x {ranks} rank(s) per model is a batch of {b * ranks} samples, "
                          f"larger than the training set ({part} samples: {where}); allowed: "
                          + (f"train.batch_per_rank <= {part // ranks}" if part >= ranks else
                             f"at most {part} rank(s) per model, or a larger workload.{key}"))
