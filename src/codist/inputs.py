"""Before any process starts: every file or folder a run config names exists and is readable.

`codist check` and `codist run` call `check_inputs(cfg)`, so a wrong `workload.data_dir` is one
line naming the key and the path, not a traceback from every rank after launch. Only the
presence and readability of the paths are checked here (cheap, no torch); the loaders check
the files' contents (dtype, shape, range) when they read them.
"""
from __future__ import annotations

import os
from pathlib import Path

from .config import ConfigError, RunConfig
from .data_root import workload_with_data
from .workloads.cifar_config import CIFAR_LAYOUT, layout_text
from .workloads.ctr_config import CRITEO_LAYOUT
from .workloads.imagenet_config import IMAGEFOLDER_LAYOUT
from .workloads.lm_config import TEXT_LAYOUT, TEXT_SHARD_PATTERNS
from .workloads.translation_config import FAIRSEQ_LAYOUT
from .workloads.translation_data import required_files


def _cifar(w, root: Path) -> tuple[list[Path], list[Path], str]:
    folder, train, test, _ = CIFAR_LAYOUT[w.dataset]
    # the loader accepts data_dir/<folder>/ or the files directly in data_dir
    base = root / folder if (root / folder).is_dir() or not (root / (train + test)[0]).exists() else root
    return [base], [base / name for name in train + test], layout_text(w.dataset)


def _imagenet(w, root: Path) -> tuple[list[Path], list[Path], str]:
    return [root / "train", root / "val"], [], IMAGEFOLDER_LAYOUT


def _lm(w, root: Path) -> tuple[list[Path], list[Path], str]:
    return [], [], TEXT_LAYOUT


def _ctr(w, root: Path) -> tuple[list[Path], list[Path], str]:
    return [], [root / f for f in (w.train_file, w.val_file) if f], CRITEO_LAYOUT


def _translation(w, root: Path) -> tuple[list[Path], list[Path], str]:
    return [], [root / f for f in required_files(w.source_lang, w.target_lang)], FAIRSEQ_LAYOUT


# workload name -> (folders, files, layout text) that its real data set needs under data_dir
_NEEDS = {"cifar": _cifar, "imagenet": _imagenet, "lm": _lm, "ctr": _ctr, "translation": _translation}


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
    w = workload_with_data(cfg)
    if getattr(w, "tokenizer_model", None):
        _check("workload.tokenizer_model", Path(w.tokenizer_model), False, "a SentencePiece .model file")
    data_dir = getattr(w, "data_dir", None)
    if data_dir is None:
        return
    root = Path(data_dir)
    folders, files, layout = _NEEDS[w.name](w, root)
    for path, folder in [(root, True)] + [(p, True) for p in folders] + [(p, False) for p in files]:
        _check("workload.data_dir", path, folder, layout)
    if w.name == "lm" and not any(p.is_file() for pattern in TEXT_SHARD_PATTERNS for p in root.rglob(pattern)):
        raise ConfigError(f"workload.data_dir: {str(root)!r} holds no text shards; expected {TEXT_LAYOUT}")
