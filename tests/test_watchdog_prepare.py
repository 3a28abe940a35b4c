"""Data preparation never races the hang watchdog (codist.runtime.heartbeat, codist.launching.supervise._watch): a rank
that prepares for longer than launch.hang_timeout_s, reporting progress or working on the CPU,
trains; a rank blocked for good while preparing is still killed. Real `codist run`s (the warm
launcher's processes, a 2-rank gloo world) with a plugin algorithm whose set-up is slow
(tests/slow_prep_algorithm.py); and the beats themselves, the Criteo cache and the readers' progress."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import TINY, deep_update
from test_ctr_workload import criteo_line, write_criteo

from codist.runtime import heartbeat
from codist.runtime.heartbeat import Heartbeat, interval

TESTS = Path(__file__).resolve().parent
HANG_S = 3   # the watchdog's timeout in these runs; the slow rank prepares for more than twice as long
SLOW = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                          "algorithm": {"name": "slow_prep", "prepare_s": 2.5 * HANG_S},
                          "launch": {"hang_timeout_s": HANG_S}})


def codist_run(tmp_path: Path, cfg: dict, name: str) -> tuple[subprocess.CompletedProcess, Path]:
    path, out = tmp_path / f"{name}.yaml", tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "CODIST_PLUGINS": "slow_prep_algorithm",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, timeout=180, env=env)
    return proc, out


@pytest.mark.parametrize("how", ["progress", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_preparation_longer_than_the_watchdog_still_trains(tmp_path, how):
    """Rank 0 prepares for 2.5 x the watchdog's timeout (reporting chunks, or busy on the CPU); rank 1
    waits for it in its first collective, making no progress of its own: the run trains to the end."""
    proc, out = codist_run(tmp_path, deep_update(SLOW, {"algorithm": {"how": how}}), how)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["setup_s"] > 2 * HANG_S   # the preparation did outlast the watchdog's timeout
    assert {json.loads((out / ".ranks" / f"rank-{r}.json").read_text())["state"] for r in (0, 1)} == {"done"}


def test_a_rank_that_hangs_while_preparing_is_killed_and_named(tmp_path):
    proc, out = codist_run(tmp_path, deep_update(SLOW, {"algorithm": {"how": "hang"}}), "hang")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # which rank stopped first is a race here (rank 1 blocks in its first collective at once)
    assert re.search(rf"no rank made progress for {HANG_S} s \(launch.hang_timeout_s\); rank [01] was the first "
                     rf"to stop, while preparing", proc.stderr), proc.stderr
    for r in (0, 1):   # both ranks are gone (the watchdog kills the launcher's whole process group)
        pid = json.loads((out / ".ranks" / f"rank-{r}.json").read_text())["pid"]
        deadline = time.time() + 10
        while Path(f"/proc/{pid}").exists() and time.time() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_the_beat_interval_bounds_the_jobs_writes_and_leaves_the_watchdog_five_beats():
    assert interval(8, 900) == 2.0            # small jobs: every 2 s
    assert interval(1024, 900) == 32.0        # 1,024 ranks: 32 writes a second in all
    assert interval(8192, 900) == 180.0       # never more than a fifth of the watchdog's timeout
    assert interval(2, 3) == pytest.approx(0.6)


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_beats_follow_progress_only_and_end_with_the_rank(tmp_path):
    """While preparing: a beat after a reader's progress (or CPU work), none while the rank waits;
    training: a beat per new update done; a final state ends the beats. Beats are not fsynced."""
    hb = Heartbeat(tmp_path, 3, world=2, hang_timeout_s=2)   # a beat every 0.4 s at most
    path = tmp_path / ".ranks" / "rank-3.json"
    first = read(path)
    assert first["state"] == "running" and first["phase"] == "preparing" and first["pid"] == os.getpid()
    time.sleep(5 * hb.every_s)   # waiting (asleep): no progress, no beat
    assert read(path)["unix"] == first["unix"]
    heartbeat.progress()
    assert wait_for(lambda: read(path)["unix"] > first["unix"])
    t_cpu = read(path)["unix"]
    end = time.monotonic() + 4 * hb.every_s
    while time.monotonic() < end:   # CPU work, no word: a beat too
        sum(i * i for i in range(1000))
    assert wait_for(lambda: read(path)["unix"] > t_cpu)
    hb.beat(7)
    assert wait_for(lambda: read(path)["step"] == 7 and read(path)["phase"] == "training")
    t7 = read(path)["unix"]
    end = time.monotonic() + 4 * hb.every_s
    while time.monotonic() < end:   # training: CPU time alone is no progress (a GPU wait can spin)
        sum(i * i for i in range(1000))
    assert read(path)["unix"] == t7
    hb.finish()
    time.sleep(3 * hb.every_s)
    assert read(path)["state"] == "done"
    hb.beat(8)
    time.sleep(3 * hb.every_s)
    assert read(path)["state"] == "done"
    assert not list(path.parent.glob(".*.tmp"))


def test_the_criteo_reader_reports_progress_and_caches_once(tmp_path, monkeypatch):
    """cached_criteo parses once (read_criteo's numbers), later calls map the file; parsing reports progress."""
    from codist.workloads import ctr
    data = tmp_path / "train.txt"
    rng = torch.Generator().manual_seed(0)
    write_criteo(data, [criteo_line(rng) for _ in range(50)])
    monkeypatch.setattr(heartbeat, "_progress", 0)
    x0, y0 = ctr.read_criteo(data, 1000)
    assert heartbeat._progress > 0
    cache = tmp_path / "cache"
    cache.mkdir()
    x1, y1 = ctr.cached_criteo(data, 1000, None, cache)
    assert np.array_equal(x0.numpy(), x1.numpy()) and np.array_equal(y0.numpy(), y1.numpy())
    files = sorted(p.name for p in cache.iterdir())
    assert len([f for f in files if f.endswith(".npy")]) == 2 and not [f for f in files if f.endswith(".tmp")]
    monkeypatch.setattr(ctr, "_parse_criteo", lambda *a: pytest.fail("parsed again"))
    x2, _ = ctr.cached_criteo(data, 1000, None, cache)
    assert np.array_equal(x0.numpy(), x2.numpy())
    x2[0, 0] = -1.0   # a copy-on-write map: the tensor is writable, the cache is not written
    assert np.array_equal(x0.numpy(), ctr.cached_criteo(data, 1000, None, cache)[0].numpy())
    monkeypatch.undo()
    x3, _ = ctr.cached_criteo(data, 1000, 10, cache)   # other settings: another cache file
    assert len(x3) == 10 and len(list(cache.glob("*.npy"))) == 2 + 2


def test_an_imagefolder_is_listed_once_as_torchvision_lists_it(tmp_path, monkeypatch):
    from torchvision import datasets
    from torchvision.datasets import folder as tv_folder
    from codist.workloads.imagefolder_list import ListedImageFolder
    root = tmp_path / "train"
    for c, n in (("b_cls", 3), ("a_cls", 2), ("c_cls", 1)):
        (root / c).mkdir(parents=True)
        for i in range(n):
            (root / c / f"{i}.jpg").write_bytes(b"")
    (root / "a_cls" / "notes.txt").write_text("not an image")
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(heartbeat, "_progress", 0)
    listed = ListedImageFolder(root, cache)
    assert listed.samples == datasets.ImageFolder(root).samples and heartbeat._progress == 3   # a class at a time
    assert len(list(cache.glob("imagefolder-*.json"))) == 1
    monkeypatch.setattr(tv_folder, "make_dataset", lambda *a, **k: pytest.fail("listed again"))
    again = ListedImageFolder(root, cache)
    assert again.samples == listed.samples and again.targets == listed.targets
    monkeypatch.undo()
    (root / "c_cls" / "9.jpg").write_bytes(b"")   # a new file changes its folder: listed anew
    assert ListedImageFolder(root, cache).samples == datasets.ImageFolder(root).samples
    assert len(list(cache.glob("imagefolder-*.json"))) == 2
    assert ListedImageFolder(root, None).samples == datasets.ImageFolder(root).samples
