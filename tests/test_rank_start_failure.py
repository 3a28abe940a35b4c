"""A rank that crashes before its first report (choosing its GPU, joining the process group) is
named with its own error by the supervisor's closing line, not "never started" (issue 42): a real
process crashes with a real traceback into its RUN/logs/rank1.log (codist.runlog.tee_rank_output),
and the real supervisor reads it."""
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from codist.launching.launchers import Launcher
from codist.launching.supervise import supervise
from codist.runlog import LOCK

TREE = textwrap.dedent("""
    import os, subprocess, sys
    from pathlib import Path
    out = Path(sys.argv[1])
    if os.environ.get("RANK") == "1":   # the rank: its output to RUN/logs/rank1.log, then a crash while starting
        from codist.runlog import tee_rank_output
        tee_rank_output()
        print("codist: rank 1 starting")
        def join_process_group(device):
            raise RuntimeError(f"CUDA error: invalid device ordinal (device {device})")
        join_process_group(3)
    rank1 = subprocess.run([sys.executable, __file__, str(out)], env={**os.environ, "RANK": "1"})
    # rank 0 loses its peer in the rendezvous and says so in its state file
    from codist.runtime.heartbeat import Heartbeat
    Heartbeat(out, 0, 2).write({"state": "error", "error": "DistNetworkError: the peer closed the connection"})
    sys.exit(1)
""")


def test_a_rank_crashing_while_starting_has_its_error_in_the_closing_line(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "logs").mkdir(parents=True)
    (out / LOCK).touch()   # what codist run holds while the run is alive
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    proc = subprocess.Popen([sys.executable, str(script), str(out)], start_new_session=True,
                            env={**__import__("os").environ, "CODIST_RANK_LOG_DIR": str(out / "logs")})
    plan = SimpleNamespace(out=out, world=2, cfg=SimpleNamespace(launch=SimpleNamespace(hang_timeout_s=900)))
    launcher = SimpleNamespace(stop=lambda proc, plan: None, exit_code=Launcher().exit_code)
    assert supervise(launcher, proc, plan) == 1
    line = capsys.readouterr().err
    assert "rank 1 failed while starting: RuntimeError: CUDA error: invalid device ordinal (device 3)" in line, line
    assert "then rank 0 failed: DistNetworkError" in line and "never started" not in line, line
    assert f"--- rank 1: the end of {out / 'logs' / 'rank1.log'} ---" in line and "join_process_group(3)" in line
