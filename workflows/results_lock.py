"""One workflow at a time on a results root, and the owner of the runs its jobs start.

Snakemake locks its working directory (.snakemake/), not the outputs: two snakemake processes
started from different folders on one results root would each delete and rerun the other's
incomplete train jobs. `hold` (common.smk's `onstart`, so a dry run, --lint, --report or --unlock
never takes it) locks RESULTS/.codist-workflow.lock for the life of the snakemake process, or
refuses in one line naming the holder's pid and folder.

`job_owner` names this snakemake process (host, pid, start time) to the runs its jobs start
(CODIST_JOB_OWNER, read by codist.rank.train's ranks): a run whose workflow is gone (kill -9 of
snakemake) checkpoints and stops within 10 updates instead of writing on while a rerun deletes
and restarts its job. `codist run` started by a job waits up to LOCK_WAIT_S for the directory
lock of a run that an earlier, killed workflow left running (codist.launching.rundir).
"""
from __future__ import annotations

import fcntl
import os
import platform
from pathlib import Path

from codist.owner import start_ticks

NAME = ".codist-workflow.lock"
LOCK_WAIT_S = 600   # a run notices its workflow's end within 10 updates: minutes at most at full scale
_held: list = []    # the open lock file, kept for the process's life


class ResultsInUse(RuntimeError):
    pass


def hold(results: str | os.PathLike) -> None:
    """Lock the results root for this process, or ResultsInUse naming who holds it."""
    root = Path(results).resolve()
    root.mkdir(parents=True, exist_ok=True)
    f = open(root / NAME, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise ResultsInUse(f"results root {root} is in use by another snakemake ({holder}); two workflows on "
                           f"one results root would delete each other's runs: wait for it to end, or use "
                           f"another --config results=...") from None
    except OSError as e:
        f.close()
        raise ResultsInUse(f"results root {root}: cannot lock {root / NAME} ({e.strerror}): put the results "
                           f"on a file system with working locks") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {platform.node()}, working directory {os.getcwd()}\n")
    f.flush()
    _held.append(f)


def job_owner() -> dict[str, str]:
    """The environment that names this process as the owner of the runs its jobs start."""
    ticks = start_ticks(os.getpid())
    if ticks is None:   # not Linux: no owner named, runs go on as before
        return {}
    return {"CODIST_JOB_OWNER": f"{platform.node()}:{os.getpid()}:{ticks}",
            "CODIST_LOCK_WAIT_S": str(LOCK_WAIT_S)}
