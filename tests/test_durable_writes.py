"""Checkpoints, models and run files reach the disk before they are renamed into place (issue 17):
a crash of the machine right after the rename must not leave a named but empty file."""
from __future__ import annotations

import os

import pytest
import torch

from codist import runlog


@pytest.fixture
def calls(monkeypatch):
    """The order of fsync (of which file or folder) and rename calls made by codist.runlog."""
    seen = []
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd):
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def record_replace(src, dst):
        seen.append(("replace", str(src), str(dst)))
        replace(src, dst)

    monkeypatch.setattr(runlog.os, "fsync", record_fsync)
    monkeypatch.setattr(runlog.os, "replace", record_replace)
    return seen


@pytest.mark.parametrize("write", [
    lambda path: runlog.atomic_torch_save({"w": torch.arange(4.0)}, path),   # checkpoints and model_<name>.pt
    lambda path: runlog.atomic_write_json(path, {"step": 3}),                  # latest.json, summary.json
])
def test_file_is_fsynced_before_rename_and_folder_after(tmp_path, calls, write):
    path = tmp_path / "checkpoint" / "group-0.pt"
    write(path)
    kinds = [c[0] for c in calls]
    assert kinds == ["fsync", "replace", "fsync"], calls
    tmp = calls[1][1]
    assert calls[0][1] == tmp and calls[1][2] == str(path)    # the temp file's data, then the rename
    assert calls[2][1] == str(path.parent)                     # then the folder entry
    assert not list(path.parent.glob(".*.tmp")) and path.stat().st_size > 0
