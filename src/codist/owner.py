"""Who waits for a run: `codist run` names itself to the ranks (CODIST_OWNER), and a rank whose
owner has gone (kill -9 of `codist run`, a closed terminal) stops as on SIGTERM: checkpoint,
exit 3. This holds for every launcher, including those that neither forward signals nor die
with their parent (the DeepSpeed launcher). A process is named by its pid and start time, so a
reused pid is not mistaken for the owner."""
from __future__ import annotations

import os
from pathlib import Path

ENV = "CODIST_OWNER"   # "<pid>:<start time in clock ticks since boot>"


def start_ticks(pid: int | str = "self") -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):   # exited, not yet reaped
        return None
    return int(fields[19])


def owner_env() -> dict[str, str]:
    """The environment entry that names this process as the run's owner (Linux; none elsewhere)."""
    ticks = start_ticks()
    return {ENV: f"{os.getpid()}:{ticks}"} if ticks is not None else {}


def owner_gone() -> bool:
    """True when the process named in CODIST_OWNER no longer runs (False when none is named)."""
    value = os.environ.get(ENV, "")
    pid, _, ticks = value.partition(":")
    if not pid.isdigit() or not ticks.isdigit():
        return False
    return start_ticks(pid) != int(ticks)
