"""Who waits for a run: `codist run` names itself to the ranks (CODIST_OWNER), and a rank whose
owner has gone (kill -9 of `codist run`, a closed terminal) stops as on SIGTERM: checkpoint,
exit 3. This holds for every launcher, including those that neither forward signals nor die
with their parent (the DeepSpeed launcher). A process is named by its pid and start time, so a
reused pid is not mistaken for the owner. `proc_stat` is the one reader of /proc/<pid>/stat (the
warm client's checks of its server's run and the supervisor's wait for a tree use it too)."""
from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "CODIST_OWNER"   # "<pid>:<start time in clock ticks since boot>"


def proc_stat(pid: int | str = "self") -> tuple[str, int, int, int, int] | None:
    """(state, parent pid, process group, session, start time in clock ticks since boot) of a
    process, from /proc/<pid>/stat; None if it has exited (a zombie too) or was never there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()   # after the name
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):   # exited, not yet reaped
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def start_ticks(pid: int | str = "self") -> int | None:
    """The process's start time (clock ticks since boot), None if gone."""
    stat = proc_stat(pid)
    return stat[4] if stat else None


def process_start_unix() -> float:
    """When this process (`codist run`) started, so that a run's `setup_s` counts its
    interpreter start and imports too (Linux: /proc; elsewhere: now)."""
    ticks = start_ticks()
    if ticks is None or not hasattr(time, "CLOCK_BOOTTIME"):
        return time.time()
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))


def owner_env() -> dict[str, str]:
    """The environment entry that names this process (`codist run`) as the run's owner (Linux; none
    elsewhere). A warm run's ranks get it too: it is in the environment the client sends."""
    ticks = start_ticks()
    return {ENV: f"{os.getpid()}:{ticks}"} if ticks is not None else {}


def owner_gone() -> bool:
    """True when the process named in CODIST_OWNER no longer runs (False when none is named)."""
    value = os.environ.get(ENV, "")
    pid, _, ticks = value.partition(":")
    if not pid.isdigit() or not ticks.isdigit():
        return False
    return start_ticks(pid) != int(ticks)
