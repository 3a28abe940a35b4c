"""The one supervisor every process tree goes through (codist.launching.launch starts it): stop
signals passed on (`Launcher.stop`), the hang watchdog, every process of the tree waited for (not
only its root: a launcher may die of a signal its ranks are still checkpointing for), and the end
mapped to one exit code (codist.exits) said in one line, naming the rank that ended the run from
what each rank wrote (RUN/.ranks/, codist.runtime.heartbeat) and the end of its log (RUN/logs/).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..exits import EXIT_DIVERGED, EXIT_FAILED, EXIT_PREEMPTED, forwarding_stop_signals
from ..owner import proc_stat
from ..runlog import LOCK

STOP_GRACE_S = 120.0   # the root gone, the rest of its tree: this long to checkpoint and exit, then SIGKILL


def supervise(launcher, proc, plan) -> int:
    """Wait for a started tree (`launcher.start(plan)` gave `proc`); returns the run's exit code."""
    out, world = plan.out, plan.world
    with forwarding_stop_signals(lambda signum, frame: launcher.stop(proc, plan)):
        hang = _watch(proc, out, plan.cfg.launch.hang_timeout_s, world)
        if not hang:
            drain(proc.pid)
    rc = launcher.exit_code(proc.returncode)
    reports = rank_reports(out)
    states = {r.get("state") for r in reports.values()} if len(reports) == world else set()
    if rc != 0 and states == {"preempted"}:
        rc = EXIT_PREEMPTED   # the launcher's own code after a SIGTERM varies (torchrun: 1; DeepSpeed's: 143)
    if rc != 0 and states == {"diverged"}:
        print(f"codist: {out.name}: {reports[0]['error']}", file=sys.stderr)
        return EXIT_DIVERGED
    if hang:
        print(f"codist: {out.name}: {hang}", file=sys.stderr)
        return EXIT_FAILED
    if rc == EXIT_PREEMPTED:
        print(f"codist: {out.name}: preempted; checkpoint written, rerun the same command to resume",
              file=sys.stderr)
        return rc
    if rc != 0:
        print(f"codist: {out.name}: run failed: {diagnose(out, world, rc)}", file=sys.stderr)
        return rc
    if not (out / "summary.json").exists():
        print(f"codist: launcher exited 0 but {out / 'summary.json'} was not written", file=sys.stderr)
        return EXIT_FAILED
    return 0


def processes() -> dict[int, tuple]:
    """Every live process (zombies excluded): pid -> codist.owner.proc_stat."""
    stats = {int(e.name): proc_stat(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()}
    return {pid: stat for pid, stat in stats.items() if stat}


def members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    return [pid for pid, stat in processes().items() if stat[2] == pgid]


def descendants(root: int) -> list[int]:
    """The live processes under `root`, children of children included (torchrun starts each rank in
    a session of its own, which a killpg of its group does not reach)."""
    children: dict[int, list[int]] = {}
    for pid, stat in processes().items():
        children.setdefault(stat[1], []).append(pid)
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def drain(pgid: int, grace_s: float = STOP_GRACE_S) -> None:
    """The tree's root has exited: wait for the rest of its process group. A group stopped as a
    service manager stops one (SIGTERM to every process) loses the DeepSpeed launcher at once while
    its ranks still checkpoint; ranks left without their root are asked to stop after a second."""
    start, told = time.monotonic(), False
    while members(pgid):
        elapsed = time.monotonic() - start
        if elapsed > 1.0 and not told or elapsed > grace_s:
            told = True
            try:
                os.killpg(pgid, signal.SIGTERM if elapsed <= grace_s else signal.SIGKILL)
            except ProcessLookupError:
                return
            if elapsed > grace_s:
                return
        time.sleep(0.1)


def rank_reports(out: Path) -> dict[int, dict]:
    reports = {}
    for path in sorted((out / ".ranks").glob("rank-*.json")):
        try:
            reports[int(path.stem.split("-")[1])] = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
    return reports


def diagnose(out: Path, world: int, returncode: int) -> str:
    """Name the rank(s) that ended the run, from what each rank wrote under RUN/.ranks/, and
    the end of their logs (RUN/logs/).

    A rank with no state file failed before its first report (choosing its device, joining the
    process group): its error is its log's. A rank still marked running after its tree exited died without raising (SIGKILL, out of
    memory): it is the cause, and the errors of the others (connection reset) its consequence;
    unless the run directory was lost or its disk filled (`storage_lost`): then the ranks could not
    write how they ended, and their own line above names the file."""
    reports = rank_reports(out)
    missing = [r for r in range(world) if r not in reports]
    died = sorted((r for r, info in reports.items() if info.get("state") == "running"),
                  key=lambda r: reports[r]["unix"])
    errors = [f"rank {r} failed: {info['error']}" for r, info in reports.items() if info.get("state") == "error"]
    parts, crashed = [], {}
    lost = storage_lost(out) if missing or died else None
    if lost:   # the ranks' own line (above) names the file; their state files could not be written
        parts.append(f"rank(s) {sorted(missing + died)} could not record how they ended: {lost}")
    else:
        # a rank that ended before its first report (set-up: device, process group) left its error in its log
        crashed = {r: error for r in missing if (error := log_error(out, r))}
        silent = [r for r in missing if r not in crashed]
        if silent:
            parts.append(f"rank(s) {silent} never started")
        parts += [f"rank {r} failed while starting: {error}" for r, error in crashed.items()]
        parts += [f"rank {r} died without an error at update {reports[r]['step']} (killed, or out of memory?)"
                  for r in died]
    if errors:
        parts.append(("then " if died or crashed else "") + "; ".join(errors))
    failed = sorted(crashed) + died + [r for r, info in reports.items() if info.get("state") == "error"]
    text = "; ".join(parts) + f" (launcher exit code {returncode})" if parts else f"launcher exit code {returncode}"
    return text + "".join(log_tail(out, r) for r in failed if r != 0)   # rank 0's output is above already


def storage_lost(out: Path) -> str | None:
    """Why ranks may have ended without writing their state under RUN/.ranks/: the run directory
    removed or replaced (its lock file, which `codist run` holds until the end, is gone with it), or
    its file system full (under 1 MiB free)."""
    if not (out / LOCK).is_file():
        return f"the run directory {out} was removed or replaced while the run was writing to it"
    try:
        if shutil.disk_usage(out).free < 2**20:
            return f"the file system holding {out} is full"
    except OSError:
        pass
    return None


def log_error(out: Path, rank: int) -> str | None:
    """The error a rank's log (RUN/logs/rank<N>.log) ends with: the exception line of its last
    Python traceback, else its last line; None when it has no log or an empty one."""
    try:
        lines = [line for line in (out / "logs" / f"rank{rank}.log").read_text(errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return None
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:   # the first line after the traceback's indented frames
        error = next((line for line in lines[starts[-1] + 1:] if not line[0].isspace()), None)
        if error:
            return error.strip()
    return lines[-1].strip() if lines else None


def log_tail(out: Path, rank: int, lines: int = 8) -> str:
    """The last lines of a rank's own log (RUN/logs/rank<N>.log), for the failure summary."""
    path = out / "logs" / f"rank{rank}.log"
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"\n--- rank {rank}: the end of {path} ---\n" + "\n".join(tail)


def _watch(proc, out: Path, hang_s: int, world: int) -> str | None:
    """Wait for the tree's root; if no rank has made progress for `hang_s` (codist.runtime.heartbeat:
    updates, or a preparation's progress), kill the tree and say which rank stopped first (a hung
    rank blocks the others in their next collective). Returns as soon as the root exits. The
    ranks' files are read every hang_s / 30 s, at most once a second (30 s at the default 900 s):
    reading a thousand files every second would load a shared file system for nothing."""
    read_every, next_read = max(1.0, hang_s / 30), 0.0
    while True:
        try:
            proc.wait(timeout=1.0)
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() < next_read:
            continue
        next_read = time.monotonic() + read_every
        reports = rank_reports(out)
        running = {r: i for r, i in reports.items() if i.get("state") == "running"}
        if len(reports) == world and running and time.time() - max(i["unix"] for i in running.values()) > hang_s:
            first = min(running, key=lambda r: running[r]["unix"])
            for pid in descendants(proc.pid):   # before the root: once it is gone they are not its children
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            where = ("while preparing (set-up, data, checkpoint load)" if running[first].get("phase") == "preparing"
                     else f"at update {running[first]['step']}")
            return (f"no rank made progress for {hang_s} s (launch.hang_timeout_s); rank {first} was the "
                    f"first to stop, {where}; the job was killed")
