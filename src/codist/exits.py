"""How a run ends, defined once: the exit codes (`codist run`'s, a rank's, the fork launcher's),
a process's end as one of them, and the stop signals a parent passes on.

Imports nothing of codist or torch: the fork launcher's parent must stay light until it forks.
"""
from __future__ import annotations

import contextlib
import os
import signal

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2   # a config, key, --set value or command line that cannot run (a rank: the world is not the config's)
EXIT_PREEMPTED = 3   # checkpointed on SIGTERM/SIGINT/SIGUSR1: not done, rerun to resume
EXIT_DIVERGED = 4    # a training loss or an evaluation became NaN or inf: stopped, no summary.json, no models

# What `codist run` returns (`codist --help` and docs/usage.md "Exit codes" are this table; tests/test_cli_help.py)
EXIT_CODES = (
    ("0", "done: the run finished (or was already finished), the config is valid, the data folder is as expected"),
    ("1", "failed: a rank raised or died, a hang, a data folder with problems (the lines before say which; "
          "a launcher's other nonzero codes pass through unchanged)"),
    ("2", "bad input: a config, key or --set value, or a command line, that cannot run (nothing started)"),
    ("3", "preempted: SIGTERM/SIGINT/SIGUSR1 reached the ranks, a checkpoint is written; rerun to resume"),
    ("4", "diverged: a training loss, or a number of an evaluation, became NaN or inf; no summary.json and no "
          "models written"),
    ("128+N", "the launcher was killed by signal N (e.g. 137: SIGKILL, often out of memory)"),
)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)   # what a parent passes on to its run


def from_returncode(rc: int) -> int:
    """A shell's exit code for a Popen-style return code: 128 + N for a process killed by signal N (-N)."""
    return 128 - rc if rc < 0 else rc


def from_wait_status(status: int) -> int:
    """A shell's exit code for an os.waitpid status: the code, or 128 + N for a process killed by signal N."""
    return from_returncode(os.waitstatus_to_exitcode(status))


@contextlib.contextmanager
def forwarding_stop_signals(handler):
    """`handler(signum, frame)` for every stop signal while the block runs; the previous handlers after."""
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
