"""Shared fixtures: small run configs written to tmp_path."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# Every process of the tests builds DeepSpeed's CPU comm op where codist's ranks do, with the venv's
# ninja (launch.op_build_env): a bare rank or a test's own DeepSpeed import would otherwise build it a
# second time (~50 s) in torch's default folder, and again whenever PATH brought another ninja.
from codist.launching.launch import op_build_env  # noqa: E402

os.environ.update(op_build_env(os.environ))

# A run that trains in a second or two: the embedded image task, a narrow resnet8. Its ranks are
# forked from a warm server kept for the whole session (start-up ~0.5 s instead of 4-8 s of imports
# per run; a warm run's rows equal a cold start's: test_warm_launcher); tests of a launcher's own
# behaviour (process trees, signals) name their launcher.
TINY = {
    "name": "tiny",
    "workload": {"name": "cifar", "train_size": 512, "val_size": 128, "width": 8},
    "parallel": {"world_size": 1},
    "train": {"steps": 6, "batch_per_rank": 16, "eval_every": 3, "eval_batch": 64},
    "launch": {"launcher": "warm", "threads_per_rank": 1},  # one thread: the same float order in every run
}


@pytest.fixture(scope="session", autouse=True)
def session_warm_servers(tmp_path_factory):
    """One runtime folder for the session's warm servers (every `codist run` of the tests, in this
    process or a child, finds them there); they are killed at the end. The generated-data cache
    (`generated_cache`) is the session's own too, so the suite never writes to ~/.cache: the ranks
    read it at run time from `codist run`'s environment, which the warm server hands them. The
    runtime folder is a short one in the temp directory (a socket's path has at most 107 bytes;
    pytest's base folder under xdist and a long TMPDIR would leave too few)."""
    folder = Path(tempfile.mkdtemp(prefix="xdg-"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(folder))
        patch.setenv("CODIST_CACHE_DIR", str(tmp_path_factory.mktemp("generated")))
        yield
    from codist.launching.warm_client import stop_servers
    stop_servers(folder, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


class _InParentEnv:
    """fn(*args) run with the environment the parent had when it started the ranks (as a spawned
    child has it; a forkserver's child would otherwise have the forkserver's, from its start)."""
    def __init__(self, fn, env: dict):
        self.fn, self.env = fn, env

    def __call__(self, *args):
        os.environ.clear()
        os.environ.update(self.env)
        return self.fn(*args)


@pytest.fixture(scope="session", autouse=True)
def spawned_ranks_skip_the_imports():
    """torch.multiprocessing.spawn's ranks (the in-process gloo worlds: tests/codistill_ranks.py,
    test_algorithms, test_bn_sync, ...) fork from one forkserver that imported torch and codist for
    the session, instead of each starting an interpreter that imports them again (~2-3 CPU s a
    rank). Each rank is still a process of its own, with its own gloo state, the parent's environment
    and working directory; only the imports are shared, as the fork and warm launchers share them."""
    import multiprocessing
    import torch.multiprocessing as torch_mp
    multiprocessing.set_forkserver_preload(["torch", "codist.rank.train"])

    def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        if start_method == "spawn":
            fn, start_method = _InParentEnv(fn, dict(os.environ)), "forkserver"
        return torch_mp.start_processes(fn, args, nprocs, join, daemon, start_method=start_method)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch_mp, "spawn", spawn)
        yield


@pytest.fixture
def warm_dir(monkeypatch):
    """A private runtime folder for this test's warm servers (launch.launcher: warm); they are
    killed afterwards. Yields the folder holding their sockets and lock files. The folder is a short
    one in the temp directory, not under tmp_path: a socket's path has at most 107 bytes, and
    tmp_path under pytest-xdist (popen-gw0/<test name>/) can leave too few for the server's."""
    folder = Path(tempfile.mkdtemp(prefix="xdg-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder / f"codist-warm-{os.getuid()}"
    from codist.launching.warm_client import stop_servers
    stop_servers(folder, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def deep_update(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_update(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture
def write_config(tmp_path):
    """write_config(extra_mapping, name=...) -> path of a YAML run config based on TINY."""
    def write(extra: dict | None = None, name: str = "run.yaml", base: dict = TINY) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(deep_update(base, extra or {})))
        return path
    return write


def launch_run(out_dir: Path, extra: dict, base: dict = TINY) -> Path:
    """Validate TINY + extra, launch it for real, return the run directory (fails loudly)."""
    from codist import config
    from codist.launching import launch
    cfg = config.validate(deep_update(base, extra), f"test config {out_dir.name}")
    assert launch.run(cfg, out_dir) == 0, f"run {out_dir} failed"
    return out_dir


def one_rank_env(run: Path, extra: dict) -> dict:
    """Write TINY + extra to run/config.yaml and return the environment a launcher gives a lone
    rank (env:// rendezvous on a free loopback port, one thread, no GPU, this checkout's src)."""
    import socket
    from codist import config
    config.dump(config.validate(deep_update(TINY, extra), "test"), run / "config.yaml")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from codist.launching.launch import op_build_env
    return {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "CODIST_THREADS_PER_RANK": "1", "CUDA_VISIBLE_DEVICES": "",
            "PYTHONPATH": str(ROOT / "src"), **op_build_env(os.environ)}


def read_summary(run: Path) -> dict:
    import json
    return json.loads((run / "summary.json").read_text())


def read_rows(run: Path) -> list[dict]:
    import json
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def comparable(rows: list[dict]) -> list[dict]:
    """Metrics rows without the machine's measurements (seconds, throughput, MFU, memory), which
    differ between two runs of one config: what a rerun or a resumed run must reproduce exactly."""
    from codist.runlog import without_machine_columns
    return [without_machine_columns(r) for r in rows]


def start_cli_run(cfg: dict, tmp_path: Path, out: Path) -> subprocess.Popen:
    """`codist run` on `cfg` in a child process (stdout and stderr together, as text)."""
    path = tmp_path / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.Popen([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_checkpoint(out: Path, proc, at_least: int, timeout=180) -> int:
    """The step of the run's newest checkpoint once it is >= at_least (fails if the run ends first)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = out / "checkpoint" / "latest.json"
        if path.exists() and json.loads(path.read_text())["step"] >= at_least:
            return json.loads(path.read_text())["step"]
        assert proc.poll() is None, f"run ended before a checkpoint: {proc.stdout.read()}"
        time.sleep(0.02)
    raise AssertionError("no checkpoint in time")


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it runs no more)."""
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_gone(pids, timeout=90.0) -> bool:
    """Wait until every process in `pids` has exited; True if they all did within `timeout`."""
    deadline = time.time() + timeout
    while not all(gone(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    return all(gone(p) for p in pids)
