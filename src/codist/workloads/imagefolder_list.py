"""`dataset: imagefolder`'s file lists, made once: torchvision's ImageFolder lists every file of
every class folder when it is built (1.28M files for ImageNet's train/: minutes on a shared file
system, in every rank of every run). `ListedImageFolder` lists them once into `workload.cache_dir`
(default <data_dir>/.codist_cache) as `imagefolder-<hash>.json`, keyed by the folders' paths and
modification times (a file added or removed changes its folder's), under a lock file; each class
folder listed is reported to the rank's heartbeat. Its samples are those ImageFolder lists, in
ImageFolder's order. Imported only for real images (torchvision)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from torchvision import datasets
from torchvision.datasets import folder as tv_folder

from ..runlog import atomic_write_json, file_lock
from ..runtime import heartbeat


class ListedImageFolder(datasets.ImageFolder):
    """ImageFolder whose file list comes from `cache_dir` (None: listed here, as ImageFolder does)."""

    def __init__(self, root, cache_dir: Path | None, **kwargs):
        self.cache_dir = cache_dir
        super().__init__(root, **kwargs)

    def make_dataset(self, directory, class_to_idx, extensions=None, is_valid_file=None, allow_empty=False):
        def listed():
            samples = []
            for name in sorted(class_to_idx):   # ImageFolder's own order, a class at a time
                samples += tv_folder.make_dataset(directory, {name: class_to_idx[name]}, extensions, is_valid_file,
                                                  allow_empty=allow_empty)
                heartbeat.progress()
            return samples
        if self.cache_dir is None:
            return listed()
        folders = [Path(directory)] + [Path(directory) / c for c in sorted(class_to_idx)]
        key = hashlib.sha256(json.dumps([[str(d.resolve()), d.stat().st_mtime_ns] for d in folders]
                                        + [sorted(class_to_idx.items()), list(extensions or ())]).encode())
        path = self.cache_dir / f"imagefolder-{key.hexdigest()[:16]}.json"
        with file_lock(self.cache_dir / f"{path.name}.lock"):
            if not path.is_file():
                atomic_write_json(path, [[os.path.relpath(p, directory), c] for p, c in listed()])
        try:
            return [(os.path.join(directory, p), c) for p, c in json.loads(path.read_text())]
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: unreadable file list ({type(e).__name__}: {e}); delete it to rebuild") from None
