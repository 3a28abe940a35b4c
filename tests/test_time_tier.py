"""benchmarks/time_tier.py refuses to time a tier beside a warm server it did not start (the timing's
ranks would run in that server, without the timing's token, and be counted as other people's load),
and a timing stopped by a signal keeps its time and resumes (a tier longer than a machine's lease)."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import time_tier


def _sleeper(env: dict) -> subprocess.Popen:
    # a real process whose command line names the warm server's module, as `ps` shows a server
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "codist.launching.warm_server"],
                            env=env)
    time.sleep(0.3)
    return proc


def test_a_warm_server_without_the_timings_token_is_found_and_one_with_it_is_not():
    mine = _sleeper({**os.environ, time_tier.MARK: "tok123"})
    other = _sleeper(dict(os.environ))
    try:
        found = time_tier.foreign_warm_servers(b"tok123")
        assert other.pid in found and mine.pid not in found
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_the_timing_refuses_to_start_beside_a_foreign_warm_server(tmp_path, capsys):
    other = _sleeper(dict(os.environ))
    try:
        rc = time_tier.main(["--results", "r", "--tier", "anil", "--logs", str(tmp_path), "--only", "none"])
    finally:
        other.kill()
        other.wait()
    assert rc == 2
    err = capsys.readouterr().err
    assert f"{other.pid}" in err and "warm server" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "load.log").exists()   # nothing sampled, nothing run


DRIVER = """
import sys
from pathlib import Path
import pytest

from benchmarks import time_tier
time_tier.ROOT = Path(sys.argv[1])   # a checkout whose `make replicate` is the stand-in below
time_tier.groups = lambda tier: [("default", []), ("fig", ["results/embedded/anil2018/fig2a.png"]), ("rest", [])]
time_tier.foreign_warm_servers = lambda token: []   # another test's server may be up: that refusal is tested above
sys.exit(time_tier.main(sys.argv[2:]))
"""
# `make replicate` that echoes its snakemake line and, for the figure, waits while `hold` exists; stopped,
# its job (as Snakemake shutting its jobs down) writes a last line a second after make has gone. The job
# says "job ready" once its trap is set: a signal before that would end it with no last line to wait for
MAKEFILE = ("replicate:\n\t@echo snakemake $(TARGETS)\n"
            "\t@if [ -n \"$(TARGETS)\" ]; then (trap 'sleep 1; echo job shut down; exit 1' TERM; "
            "echo job ready; while [ -e hold ]; do sleep 0.1; done) & wait; fi\n")


def _git(repo, *argv):
    return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True, check=True).stdout


def test_a_stopped_timing_writes_its_end_line_commits_its_logs_and_resumes(tmp_path):
    """SIGTERM to the timing while a call runs: make's process group stops, the call's end line is
    written and the logs committed; the same command later skips the finished group, appends the
    stopped group's next call to its log and runs the rest (real make, real signal, real git)."""
    from benchmarks import replicate_time
    repo, main = tmp_path / "worktree", tmp_path / "main"   # the timed checkout; the one its logs commit into
    for checkout in (repo, main):
        checkout.mkdir()
        _git(checkout, "init", "-q")
        _git(checkout, "config", "user.email", "t@example.invalid")
        _git(checkout, "config", "user.name", "t")
        _git(checkout, "commit", "-q", "--allow-empty", "-m", "init")
    (repo / "Makefile").write_text(MAKEFILE)
    head = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "hold").touch()
    logs = main / "timing"
    cmd = [sys.executable, "-c", DRIVER, str(repo), "--results", "results", "--tier", "anil", "--logs", str(logs),
           "--commit-logs"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(time_tier.ROOT), str(time_tier.ROOT / "src")])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not ((logs / "fig.log").exists() and "job ready" in (logs / "fig.log").read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out
    assert "fig: stopped by a signal" in out
    assert (logs / "fig.log").read_text().splitlines()[-1].startswith("== end fig ")   # after the job's last line
    assert "job shut down" in (logs / "fig.log").read_text()
    [stopped] = replicate_time.parse_log(logs / "fig.log")
    assert stopped["rc"] != 0 and stopped["end"] is not None and stopped["commit"] == head
    assert not (logs / "rest.log").exists()
    committed = _git(main, "log", "--format=%s")
    assert "Timing: tier anil, fig stopped by signal 15" in committed and "default ended rc=0" in committed
    assert _git(main, "status", "--porcelain", "--", "timing") == ""   # every log as committed
    (repo / "hold").unlink()
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(replicate_time.parse_log(logs / "default.log")) == 1   # finished: skipped
    first, second = replicate_time.parse_log(logs / "fig.log")
    assert (first["rc"] != 0, second["rc"]) == (True, 0) and second["start"] >= first["end"]
    assert replicate_time.parse_log(logs / "rest.log")[0]["rc"] == 0


def test_commit_logs_outside_a_git_checkout_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        time_tier.main(["--results", "results", "--logs", str(tmp_path / "logs"), "--commit-logs"])
    assert f"--commit-logs: {tmp_path / 'logs'} is not inside a git checkout" in capsys.readouterr().err


def test_a_results_root_that_already_holds_a_groups_figure_is_refused(tmp_path, capsys, monkeypatch):
    """A checkout's committed results root: Snakemake finds the tier's figures up to date and trains
    nothing, so the timing would time nothing (seen once: the anil tier's fig2a 'made' in 4 s)."""
    monkeypatch.setattr(time_tier, "groups", lambda tier: [("default", []), ("fig", ["anil2018/fig2a.png"])])
    monkeypatch.setattr(time_tier, "foreign_warm_servers", lambda token: [])   # another test's may be up
    monkeypatch.setattr(time_tier, "call", lambda *args: pytest.fail("the timing ran a call"))
    made = tmp_path / "results" / "embedded" / "anil2018" / "fig2a.png"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"png")
    args = ["--results", str(tmp_path / "results"), "--logs", str(tmp_path / "logs")]
    assert time_tier.main(args) == 2
    assert f"time_tier: {made} is already there and no call of this timing made it" in capsys.readouterr().err
    (tmp_path / "logs" / "fig.log").write_text("== start fig 2026-12-07T10:00:00Z 1000\n")   # this timing's own
    resumed = argparse.Namespace(results=str(tmp_path / "results"), logs=tmp_path / "logs")
    assert time_tier.made_elsewhere(resumed, time_tier.groups("anil")) == []
