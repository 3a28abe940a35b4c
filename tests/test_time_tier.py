"""benchmarks/time_tier.py refuses to time a tier beside a warm server it did not start: the timing's
ranks would run in that server, without the timing's token, and be counted as other people's load."""
from __future__ import annotations

import os
import subprocess
import sys
import time

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
