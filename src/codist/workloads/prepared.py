"""Where a real data set's prepared form (Criteo parsed, an ImageFolder's file list) is cached, made
once for every rank and run: `workload.cache_dir`, default <data_dir>/.codist_cache (the LM's
tokens live there too)."""
from __future__ import annotations

import sys
from pathlib import Path


def cache_folder(cache_dir: str | None, data_dir: str, what: str) -> Path | None:
    """The folder, created; None (with one line on stderr) when it cannot be: then every rank
    prepares the data itself, as before there was a cache."""
    folder = Path(cache_dir) if cache_dir else Path(data_dir) / ".codist_cache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError as e:
        print(f"codist: cannot create the {what} cache folder {str(folder)!r} ({e}); every rank prepares the data "
              f"itself (set workload.cache_dir to a writable folder)", file=sys.stderr)
        return None
