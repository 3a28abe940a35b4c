"""Node-local staging of a prepared data set (issue 51): Criteo's parsed cache is copied once per node
into this user's private folder under the job's scratch ($SLURM_TMPDIR, ...) and the ranks map the
copy, not the cache on a shared file system. Real files in temporary folders: the copy is the one
mapped and is whole, two processes staging at once make one copy, a truncated or stale copy is made
again, and a staging folder that another user could have made is not used."""
from __future__ import annotations

import filecmp
import multiprocessing
import os
import time
from pathlib import Path

import pytest
import torch

from codist.workloads import ctr as C
from codist.workloads import prepared
from test_ctr_workload import criteo_line, write_criteo


@pytest.fixture
def another_disk(monkeypatch):
    """The test's scratch counts as another file system than the cache's (both are in tmp_path)."""
    monkeypatch.setattr(prepared, "same_file_system", lambda a, b: False)


def criteo_cache(tmp_path: Path, lines: int = 300) -> tuple[Path, Path]:
    """(the Criteo file, the shared cache folder)."""
    rng = torch.Generator().manual_seed(0)
    data = tmp_path / "data"
    data.mkdir()
    write_criteo(data / "train.txt", [criteo_line(rng) for _ in range(lines)])
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    return data / "train.txt", cache


def mapped_files() -> set[str]:
    return {line.split(maxsplit=5)[5].strip() for line in Path("/proc/self/maps").read_text().splitlines()
            if len(line.split(maxsplit=5)) == 6}


def test_the_scratch_is_the_jobs_or_the_one_named():
    assert prepared.node_scratch({}) is None                                   # not in a job: in place
    assert prepared.node_scratch({"TMPDIR": "/tmp/x"}) is None
    job = {"SLURM_JOB_ID": "7", "TMPDIR": "/tmp/job7"}
    assert prepared.node_scratch(job) == Path("/tmp/job7")
    assert prepared.node_scratch({**job, "SLURM_TMPDIR": "/local/7"}) == Path("/local/7")
    assert prepared.node_scratch({**job, "CODIST_STAGE_DIR": "/ssd"}) == Path("/ssd")
    assert prepared.node_scratch({**job, "CODIST_STAGE_DIR": "off"}) is None
    assert prepared.node_scratch({"SLURM_JOB_ID": "7"}) is None


def test_criteo_is_mapped_from_a_whole_node_local_copy(tmp_path, another_disk):
    source, cache = criteo_cache(tmp_path)
    scratch = tmp_path / "node-local"
    scratch.mkdir()
    x, y = C.cached_criteo(source, 1000, None, cache, scratch)
    maps = mapped_files()
    folder = scratch / f"codist-stage-{os.geteuid()}"
    built = sorted(cache.glob("criteo-*.npy"))
    copies = [folder / p.name for p in built]
    assert len(built) == 2 and all(str(c) in maps for c in copies)           # the copies are mapped
    assert not any(str(p) in maps for p in built)                            # the shared cache is not
    assert all(filecmp.cmp(p, c, shallow=False) for p, c in zip(built, copies))
    rx, ry = C.read_criteo(source, 1000)
    assert torch.equal(x, rx) and torch.equal(y, ry)
    assert folder.stat().st_mode & 0o777 == 0o700
    del x, y
    x, _ = C.cached_criteo(source, 1000, None, cache)                        # no scratch: in place
    assert str(built[0]) in mapped_files()


def _stage_at_once(files, scratch, start, log, out):
    copy = prepared._copy

    def slow_copy(src, dst):   # the first stager is still copying when the second asks
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {Path(dst).name}\n")
        time.sleep(0.5)
        copy(src, dst)
    prepared._copy = slow_copy
    start.wait()
    out.put([(str(c), os.stat(c).st_ino) for c in prepared.staged(files, scratch)])


def test_two_processes_staging_at_once_make_one_whole_copy(tmp_path, another_disk):
    files = []
    for name, size in (("a.inputs.npy", 3_000_000), ("a.labels.npy", 1000)):
        files.append(tmp_path / name)
        files[-1].write_bytes(os.urandom(size))
    scratch, log = tmp_path / "scratch", tmp_path / "copies.log"
    scratch.mkdir()
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    stagers = [ctx.Process(target=_stage_at_once, args=(files, scratch, start, log, out)) for _ in range(2)]
    for p in stagers:
        p.start()
    start.set()
    got = [out.get(timeout=60) for _ in stagers]
    for p in stagers:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got[0] == got[1]                                   # the same copies (same inodes: none replaced)
    copiers = log.read_text().split("\n")[:-1]
    assert len(copiers) == 2 and len({line.split()[0] for line in copiers}) == 1   # one process copied both
    for source, (copy, _) in zip(files, got[0]):
        assert filecmp.cmp(source, copy, shallow=False)
    folder = Path(got[0][0][0]).parent
    assert sorted(p.name for p in folder.iterdir()) == ["a.inputs.npy", "a.inputs.npy.lock", "a.labels.npy"]


def test_a_truncated_stale_or_planted_copy_is_made_again(tmp_path, another_disk):
    source = tmp_path / "b.inputs.npy"
    source.write_bytes(os.urandom(200_000))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    copy, = prepared.staged([source], scratch)
    with open(copy, "r+b") as f:                              # a copy cut short (a full disk, a crash)
        f.truncate(1000)
    assert prepared.staged([source], scratch) == [copy] and filecmp.cmp(source, copy, shallow=False)
    copy.write_bytes(os.urandom(200_000))                     # the right size, not the source's time
    assert prepared.staged([source], scratch) == [copy] and filecmp.cmp(source, copy, shallow=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep")
    copy.unlink()
    copy.symlink_to(elsewhere)                                 # a link where the copy goes: not followed
    assert prepared.staged([source], scratch) == [copy] and not copy.is_symlink()
    assert elsewhere.read_bytes() == b"keep" and filecmp.cmp(source, copy, shallow=False)


@pytest.mark.parametrize("made", ["open to all", "a link", "another user's"])
def test_a_staging_folder_another_user_could_have_made_is_not_used(tmp_path, another_disk, capsys, made):
    source = tmp_path / "c.labels.npy"
    source.write_bytes(b"0123456789")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    folder = scratch / f"codist-stage-{os.geteuid()}"
    if made == "open to all":
        folder.mkdir()
        folder.chmod(0o777)
    elif made == "a link":
        (tmp_path / "theirs").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "theirs")
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to another uid")
        folder.mkdir(mode=0o700)
        os.chown(folder, 12345, 12345)
    assert prepared.staged([source], scratch) == [source]     # mapped where it is
    assert "cannot stage c.labels.npy" in capsys.readouterr().err
    assert not (tmp_path / "theirs" / source.name).exists()
