"""Who waits for a run: `codist run` names itself to the ranks (CODIST_OWNER), and a rank whose
owner has gone (kill -9 of `codist run`, a closed terminal) stops as on SIGTERM: checkpoint,
exit 3. This holds for every launcher, including those that neither forward signals nor die
with their parent (the DeepSpeed launcher). A process is named by its pid and start time, so a
reused pid is not mistaken for the owner. `proc_stat` is the one reader of /proc/<pid>/stat (the
warm client's checks of its server's run and the supervisor's wait for a tree use it too).

Who owns a path: `private_dir` trusts a folder only if this user made it, or owns it with no
permission for anyone else (another user may have made it first in a shared temp directory: the
warm server's folder, a node's data staging folder); `open_private` opens a file in one without
following a link."""
from __future__ import annotations

import os
import stat
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


class UntrustedPath(RuntimeError):
    """A folder, or a file in it, that is not this user's private one (one line: why)."""


def private_dir(path: Path) -> Path:
    """`path` as a folder only this user can use: created with mode 0700, or, if it exists, a real
    directory (not a symbolic link) owned by this user with no permission for group or others;
    otherwise UntrustedPath. (Another user may have made it first in a shared temp directory.)"""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise UntrustedPath(f"{path}: cannot create this user's private folder: {e.strerror}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise UntrustedPath(f"{path} is {what}; expected this user's own folder (mode 0700)")
    if st.st_uid != os.geteuid():
        raise UntrustedPath(f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})")
    if st.st_mode & 0o077:
        raise UntrustedPath(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; expected 0700 (other users "
                            f"could replace what is in it)")
    return path


def open_private(path: Path, flags: int) -> int:
    """os.open for a file of this user's private folder: never through a symbolic link, created 0600."""
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
