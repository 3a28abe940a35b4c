"""`codist run` of a warm run hands its whole command to the warm server (codist.warm_cli): the
client imports no config schema, the supervisor runs the command and owns the directory for the
client, a server whose imports do not fit the resolved config answers RETRY_COLD, and what the
client cannot tell from the raw YAML takes the ordinary path (same rows)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import yaml
from conftest import TINY, deep_update, read_rows

from codist.rank_env import rank_env
from codist.warm_cli import warm_threads
from codist.warm_client import WarmRun
from codist.exits import RETRY_COLD

HEAVY = {"pydantic", "codist.config", "torch"}   # what the client of a warm run does not import
TWO = deep_update(TINY, {"parallel": {"world_size": 2}})


def cli_run(tmp_path, cfg: dict, name: str):
    """A real `codist run` with -X importtime: (its pid, exit code, stderr, the modules it imported)."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "codist.cli", "run", str(path),
                             "--out", str(tmp_path / name)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _, err = proc.communicate(timeout=300)
    imported = {line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import time:")}
    return proc.pid, proc.returncode, err, imported


def rows(run):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in read_rows(run)]


def test_a_warm_codist_run_runs_in_the_server_with_the_rows_of_the_ordinary_path(tmp_path):
    pid, rc, err, imported = cli_run(tmp_path, TWO, "thin")
    assert rc == 0, err[-3000:]
    assert "codist.warm_cli" in imported and not imported & HEAVY, sorted(imported & HEAVY)
    # the directory's lock names the client (the codist run a user sees), not the server's supervisor
    assert (tmp_path / "thin" / ".codist.lock").read_text().strip() == str(pid)
    # no explicit threads_per_rank: the client cannot pick the server before validating; ordinary path
    ordinary = deep_update(TWO, {})
    ordinary["launch"] = {k: v for k, v in TWO["launch"].items() if k != "threads_per_rank"}
    _, rc, err, imported = cli_run(tmp_path, ordinary, "ordinary")
    assert rc == 0, err[-3000:]
    assert "codist.config" in imported
    assert rows(tmp_path / "thin") == rows(tmp_path / "ordinary")


def test_a_server_whose_imports_do_not_fit_answers_retry_and_runs_nothing(tmp_path):
    """The client guessed the server from the raw YAML; the supervisor checks the guess against the
    validated config (here the session's server, keyed for 1 thread per rank; the config asks 2)
    before it touches the run."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, {"launch": {"threads_per_rank": 2}})))
    out = tmp_path / "out"
    options = {"config": str(path), "overrides": [], "data_root": None, "out": str(out), "fresh": False}
    request = {"run": options, "env": dict(os.environ), "config": str(path), "launched_unix": time.time(),
               "pid": os.getpid()}
    assert WarmRun(request, rank_env(os.environ, 1, "cpu")).wait(timeout=120) == RETRY_COLD
    assert not (out / "config.yaml").exists() and not (out / "summary.json").exists()


def test_what_the_client_reads_ahead(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(TINY))
    assert warm_threads(str(path), []) == 1
    assert warm_threads(str(path), ["launch.threads_per_rank=2"]) == 2
    assert warm_threads(str(path), ["launch.launcher=fork"]) is None
    assert warm_threads(str(path), ["launch={launcher: warm, threads_per_rank: 1}"]) is None   # a whole section
    assert warm_threads(str(path), ["launch.device=cuda"]) is None
    assert warm_threads(str(path), ["launch.threads_per_rank=auto"]) is None
    assert warm_threads(str(tmp_path / "missing.yaml"), []) is None      # the ordinary path says what is wrong
    (tmp_path / "bad.yaml").write_text("launch: [unclosed")
    assert warm_threads(str(tmp_path / "bad.yaml"), []) is None
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert warm_threads(str(tmp_path / "list.yaml"), []) is None
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-2]")
    assert warm_threads(str(path), []) is None
