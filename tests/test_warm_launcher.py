"""`launch.launcher: warm`: runs forked from one server that keeps torch/deepspeed imported.
Same rows as a cold start, one server for many runs, a failing run fails alone, signals and a
vanished `codist run` reach the run's ranks; and the one-rank path without a launcher process."""
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from conftest import TINY, comparable, deep_update, gone, wait_gone, launch_run, read_rows, read_summary, wait_for_checkpoint
from conftest import start_cli_run as start

from codist import config
from codist.launching import launch
from codist.config import ConfigError
from codist.exits import EXIT_PREEMPTED
from codist.launching.warm_client import server_key

TWO = {"parallel": {"world_size": 2}}
WARM = {"launch": {"launcher": "warm"}}
LONG = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                          "algorithm": {"name": "codistill", "exchange_every": 7, "data": "disjoint"},
                          "train": {"steps": 60, "eval_every": 10, "checkpoint_every": 10},
                          "launch": {"launcher": "warm"}})


def servers(folder: Path) -> list[int]:
    return sorted(int(p.read_text()) for p in folder.glob("*.lock") if p.read_text().strip())


def current_key(extra: dict) -> str:
    cfg = config.validate(deep_update(TINY, extra))
    return server_key(launch.launch_env(cfg, "cpu", launch.threads_per_rank(cfg)))


def rank_pids(out: Path, world: int) -> list[int]:
    return [json.loads((out / ".ranks" / f"rank-{r}.json").read_text())["pid"] for r in range(world)]


def test_the_server_key_follows_the_code_and_the_import_environment(tmp_path):
    env = {"OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", "CODIST_LAUNCH_UNIX": "1.0", "HOME": "/a"}
    key = server_key(env)
    assert server_key({**env, "CODIST_LAUNCH_UNIX": "2.0", "HOME": "/b"}) == key   # per-run values
    assert server_key({**env, "OMP_NUM_THREADS": "2"}) != key                      # read at import
    source = Path(launch.__file__)
    stat = source.stat()
    try:   # an edited source file: a new server, never stale code
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        assert server_key(env) != key
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert server_key(env) == key


def test_warm_is_refused_for_cuda_and_across_nodes(tmp_path, monkeypatch):
    cfg = config.validate(deep_update(TINY, {"launch": {"launcher": "warm", "device": "cuda"}}))
    with pytest.raises(ConfigError, match=r"launch\.launcher='warm' with device cuda"):
        launch.run(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    with pytest.raises(ConfigError, match=r"launch\.launcher='warm' across 2 nodes"):
        launch.check_fits(config.validate({**TWO, **WARM}), "cpu")


def test_one_rank_starts_without_a_launcher_process(tmp_path):
    for name in ("deepspeed", "torchrun"):
        cfg = config.validate({"launch": {"launcher": name}})
        cmd = launch.build_command(cfg, tmp_path / "c.yaml", tmp_path, 29500, env={})
        assert cmd == [sys.executable, "-m", "codist.rank.train", "--config", str(tmp_path / "c.yaml"),
                       "--out", str(tmp_path), "--local_rank=0"]


@pytest.mark.slow
def test_warm_runs_give_the_rows_of_a_cold_start_from_one_server(tmp_path, warm_dir):
    cold = launch_run(tmp_path / "fork", deep_update(TWO, {"launch": {"launcher": "fork"}}))
    keys = {current_key(deep_update(TWO, WARM))}
    first = launch_run(tmp_path / "warm1", deep_update(TWO, WARM))
    second = launch_run(tmp_path / "warm2", deep_update(TWO, WARM))
    keys.add(current_key(deep_update(TWO, WARM)))
    assert comparable(read_rows(first)) == comparable(read_rows(cold))
    assert comparable(read_rows(second)) == comparable(read_rows(cold))
    # the second run reused the first's server (unless a source file was edited meanwhile)
    assert len(servers(warm_dir)) == len(keys)
    assert json.loads((second / "manifest.json").read_text())["launcher"] == "warm"
    assert read_summary(second)["setup_s"] > 0
    # one rank, no launcher process: the same rows as forked from the warm server
    direct = launch_run(tmp_path / "direct", {"launch": {"launcher": "torchrun"}})
    warm_one = launch_run(tmp_path / "warm_one", WARM)
    assert comparable(read_rows(direct)) == comparable(read_rows(warm_one))
    assert json.loads((direct / "manifest.json").read_text())["command"][0].endswith("train.py")


@pytest.mark.slow
def test_a_run_that_dies_fails_alone_and_the_server_goes_on(tmp_path, warm_dir):
    victim = tmp_path / "victim"
    proc = start(LONG, tmp_path, victim)
    wait_for_checkpoint(victim, proc, 10)
    bystander = start(deep_update(TINY, {**TWO, **WARM}), tmp_path, tmp_path / "bystander")
    os.kill(rank_pids(victim, 2)[1], signal.SIGKILL)
    rc = proc.wait(timeout=120)
    text = proc.stdout.read()
    assert rc not in (0, EXIT_PREEMPTED), text[-2000:]
    assert "victim: run failed" in text and "rank 1 died" in text, text[-2000:]
    assert bystander.wait(timeout=180) == 0, bystander.stdout.read()[-2000:]
    assert [r["step"] for r in read_rows(tmp_path / "bystander")] == [3, 6]
    assert not (victim / "summary.json").exists()
    server = servers(warm_dir)
    after = launch_run(tmp_path / "after", deep_update(TWO, WARM))   # the server still serves
    assert read_summary(after)["steps"] == 6
    assert all(not gone(pid) for pid in server)


@pytest.mark.slow
def test_a_vanished_codist_run_stops_its_ranks(tmp_path, warm_dir):
    """kill -9 of `codist run`: nobody waits for the run any more, so its ranks stop (as on
    SIGTERM: checkpoint, then exit) instead of training on as orphans."""
    out = tmp_path / "orphan"
    proc = start(deep_update(LONG, {"train": {"steps": 5000}}), tmp_path, out)
    wait_for_checkpoint(out, proc, 10)
    pids = rank_pids(out, 2)
    proc.kill()
    proc.wait()
    assert wait_gone(pids), "the ranks kept running after codist run was killed"
    assert not (out / "summary.json").exists()
    assert {json.loads(p.read_text())["state"] for p in (out / ".ranks").glob("rank-*.json")} == {"preempted"}
