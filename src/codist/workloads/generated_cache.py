"""On-disk cache of the embedded data sets' generated arrays: a run after the first loads them.

Every rank of every run builds its embedded data set from the config's knobs alone; the forks of
the warm server start fresh, so an in-process cache never outlives a run. `cached` keeps each
generated set as one uncompressed .npz (exact dtypes and bits), keyed by everything it depends
on: the kind, the knobs, the workloads' data versions, numpy's version (its random streams) and
the bytes of the generating source files, so an edited generator never serves stale data.

Folder: `$CODIST_CACHE_DIR`, else `$XDG_CACHE_HOME/codist/generated`, else
`~/.cache/codist/generated` (an empty variable counts as unset); `CODIST_CACHE_DIR=off` turns the
cache off. A missing, truncated or unreadable file is generated again; a folder that cannot be
written leaves the data generated but not cached (one line on stderr, from rank 0 only). Files
are written atomically (temp file + rename), so ranks that generate the same set at once are
safe: the contents are identical and the last rename wins. A file made by another version of the
generator is removed when its successor is written, so the folder holds one file per data set.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from ..runlog import atomic_write_bytes
from . import data_versions

OFF = "off"
_warned = False   # one warning per process about an unwritable folder


@dataclass(frozen=True)
class Generated:
    arrays: dict[str, np.ndarray]
    loaded: bool      # read from the cache (else generated now)
    seconds: float    # spent loading or generating them


def cache_dir() -> Path | None:
    """The cache folder, or None when CODIST_CACHE_DIR=off."""
    chosen = os.environ.get("CODIST_CACHE_DIR")
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "codist" / "generated"


def source_bytes(path: str | os.PathLike) -> bytes:
    return Path(path).read_bytes()


def key(kind: str, knobs: dict, sources: Iterable[str | os.PathLike]) -> str:
    """'<what>-<how>': a hash of the kind and knobs (what the arrays are), then a hash of what made
    them (data versions, numpy, the sources' bytes), so a newer generator's file replaces the old one."""
    what = hashlib.sha256(json.dumps({"kind": kind, "knobs": knobs}, sort_keys=True).encode())
    how = hashlib.sha256(json.dumps({"data_versions": data_versions(), "numpy": np.__version__}, sort_keys=True).encode())
    for path in sources:
        how.update(hashlib.sha256(source_bytes(path)).digest())
    return f"{what.hexdigest()[:16]}-{how.hexdigest()[:16]}"


def cached(kind: str, knobs: dict, make: Callable[[], dict[str, np.ndarray]],
           extra_sources: Iterable[str | os.PathLike] = ()) -> Generated:
    """`make()`'s arrays, from the cache when they are there, else generated (and cached).

    `knobs` are all of make's inputs (JSON values); the file `make` is defined in is part of the
    key, `extra_sources` name other files whose contents shape the data (e.g. constants).
    """
    start = time.perf_counter()
    folder = cache_dir()
    path = None
    if folder is not None:
        path = folder / f"{kind}-{key(kind, knobs, [make.__code__.co_filename, *extra_sources])}.npz"
        arrays = _load(path)
        if arrays is not None:
            return Generated(arrays, True, time.perf_counter() - start)
    arrays = make()
    if path is not None:
        _store(path, arrays)
    return Generated(arrays, False, time.perf_counter() - start)


def _load(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except Exception:   # missing, truncated, corrupt: generate again
        return None


def _store(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as e:
        _warn_once(f"codist: not caching generated data in {path.parent} ({e.strerror or e}); "
                   f"set CODIST_CACHE_DIR to a writable folder or to 'off'")
        return
    # The same data set made by another generator version goes: one file per data set, not per edit.
    same_knobs = path.name.rsplit("-", 1)[0]
    for other in path.parent.glob(f"{same_knobs}-*.npz"):
        if other != path:
            with contextlib.suppress(OSError):
                other.unlink(missing_ok=True)


def _warn_once(line: str) -> None:
    global _warned
    if not _warned and os.environ.get("RANK", "0") == "0":   # every rank would say the same
        print(line, file=sys.stderr)
    _warned = True
