"""A tier's end-to-end wall time on this machine, figure by figure, with what else ran beside it:

    python benchmarks/time_tier.py --results DIR [--tier paper|decisive|...] [--logs DIR/timing] [--only NAME ...]
        [--ledger keep|commit [--ledger-dir DIR]] [--commit-logs]

Runs `make replicate TIER=<tier> RESULTS=DIR TARGETS=...` once per group, one after another: the
default tier's figures together ("default"), then each figure of the tier alone, then one call with no
targets ("rest": the claims tables, notebooks and summary figure of `all`). Each call's output goes to
LOGS/<name>.log between '== start NAME <iso> <epoch> load=L commit=SHA' and '== end NAME <iso> <epoch>
rc=N' lines, the format benchmarks/replicate_time.py reads; a group whose log already holds an rc=0 end
is skipped, so a stopped timing resumes, appending its next call to the group's log. Read the rows with
replicate_time.py --log LOGS/*.log --load LOGS/load.log. With --ledger, the calls pass LEDGER= (and
LEDGER_DIR=) to make: runs the ledger holds are restored, not trained (each leaves
restored_from_ledger.json beside it), so such a call times only the runs it trained.

A tier longer than a machine's lease (the anil tier, about 4 h, on machines lent for 3) is timed in
stretches: LOGS inside a git checkout (the ledger's), `--ledger commit --commit-logs`, and SIGTERM or
SIGINT to stop it before the machine goes: the call stops make's process group, waits until all of it
has gone, writes its end line, and the logs are committed with the runs the ledger committed one by one. The same command on the next
machine skips the finished groups and resumes the stopped one; replicate_time.py counts a restored run
as the timing's own when it trained inside one of the logged calls, and leaves the gap out.

LOGS/load.log gets a line every 30 s: '<epoch> <1-min load> <foreign>', where foreign is the mean
number of runnable threads over the last 30 s (sampled every 2 s from /proc) that are not this
timing's: a process is the timing's when its environment carries this call's CODIST_TIER_TIMING
token (make, Snakemake, its jobs, and the warm server and ranks, which inherit it even after they
leave the driver's process tree; a warm server that was already running when the timing began would
serve its ranks outside the token, so the timing refuses to start beside one). The tier's own ranks load a 2-core machine to 2 and beyond, so the
load average alone cannot tell a quiet timing from a shared one; the foreign count can.

The results root must be fresh (`--results runs/<tier>-timing/results`, ignored by git): the timing
refuses one that already holds a figure of a group it has not started, which Snakemake would find up
to date, training nothing (a checkout's committed `results`).

Why not Snakemake's --benchmark: it times one job, not a tier, and says nothing of what else ran.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from analysis.schema import TIERS
from benchmarks.replicate_time import SAMPLE_PERIOD_S
from codist.runlog import git_state
from workflows.experiments import load_plan
from workflows.run_ledger import LedgerError, commit_paths, repo_of

ROOT = Path(__file__).resolve().parent.parent

MARK = "CODIST_TIER_TIMING"
GROUP_EXIT_S = 120   # how long a stopped call's processes get to finish shutting down
SAMPLE_S, WRITE_S = 2.0, SAMPLE_PERIOD_S


def groups(tier: str, scale: str = "embedded") -> list[tuple[str, list[str]]]:
    """(name, TARGETS) per call: the default tier's figures, each figure of `tier`, then the rest."""
    plan = load_plan(ROOT / "replications", scale, None, tier, 0, "results")
    made = [(pf, plan.tier_of[pf]) for pf in plan.figures]   # figures with runs at this scale
    default = [f"{p}/{f}.png" for (p, f), t in made if t == "default"]
    own = [(f"{p}-{f}", [f"{p}/{f}.png"]) for (p, f), t in made if t != "default"]   # only `tier`'s: in_tier
    return [("default", default), *own, ("rest", [])]


def _not_ours(pid: str, token: bytes) -> bool:
    """Whether process `pid` is not this timing's: its environment lacks the timing's token."""
    return token not in Path(f"/proc/{pid}/environ").read_bytes()


def foreign_runnable_threads(token: bytes) -> int:
    """Runnable threads of every process that is not this timing's (no `token` in its environment)."""
    count = 0
    me = os.getpid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            running = 0
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                running += stat[stat.rindex(")") + 2] == "R"
            if running and int(pid) != me and _not_ours(pid, token):
                count += running
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
            continue   # gone while read
    return count


def sample(path: Path, token: bytes, stop: threading.Event) -> None:
    """Appends '<epoch> <1-min load> <foreign>' to `path` every WRITE_S until `stop`."""
    seen: list[int] = []
    last = time.monotonic()
    while not stop.wait(SAMPLE_S):
        seen.append(foreign_runnable_threads(token))
        if time.monotonic() - last >= WRITE_S:
            with path.open("a") as f:
                f.write(f"{int(time.time())} {os.getloadavg()[0]:.2f} {sum(seen) / len(seen):.2f}\n")
            seen, last = [], time.monotonic()


def foreign_warm_servers(token: bytes) -> list[int]:
    """Pids of codist warm servers this timing did not start: ranks they fork would run outside the
    timing's token and count as foreign (a server outlives the call that started it by its idle_s)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"codist.launching.warm_server" in cmd and _not_ours(pid, token):
                found.append(int(pid))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def finished(log: Path) -> bool:
    return log.exists() and any(line.startswith("== end ") and line.rstrip().endswith("rc=0")
                                for line in log.read_text().splitlines())


class Stopped(Exception):
    """SIGTERM or SIGINT reached the timing: the call was stopped and its end line written."""


def call(name: str, targets: list[str], args, env: dict) -> int:
    """One `make replicate` call between its start and end lines. A SIGTERM or SIGINT to the timing
    stops make's whole process group (Snakemake, its jobs, their ranks), waits for it and writes the
    end line with make's code, so that a timing stopped before its machine goes away keeps its
    time: a later resumption appends its own call to the same log (replicate_time.py counts both,
    not the gap between them)."""
    log = args.logs / f"{name}.log"
    now = dt.datetime.now(dt.timezone.utc)
    stopped = []
    with log.open("a") as out:
        out.write(f"== start {name} {now:%Y-%m-%dT%H:%M:%SZ} {int(now.timestamp())} "
                  f"load={os.getloadavg()[0]:.2f} commit={git_state(ROOT)['commit'] or 'unknown'}\n")
        out.flush()
        cmd = ["make", "--no-print-directory", "replicate", f"TIER={args.tier}", f"RESULTS={args.results}",
               f"CORES={args.cores}"] + ([f"TARGETS={' '.join(targets)}"] if targets else []) \
            + ([f"LEDGER={args.ledger}"] if args.ledger else []) \
            + ([f"LEDGER_DIR={args.ledger_dir}"] if args.ledger_dir else [])
        started: list[subprocess.Popen] = []

        def stop(signum, _frame):
            stopped.append(signum)
            for proc in started:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)   # its own session: make and all it started
                except ProcessLookupError:
                    pass

        # the handlers before make starts: a signal between the two would otherwise kill the timing unrecorded
        before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            started.append(proc)
            if stopped:   # the signal came while make was starting
                os.killpg(proc.pid, signal.SIGTERM)
            rc = proc.wait()
            if stopped:   # Snakemake may still be shutting its jobs down, writing to this log
                wait_for_group(proc.pid)
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)
        end = dt.datetime.now(dt.timezone.utc)
        out.write(f"== end {name} {end:%Y-%m-%dT%H:%M:%SZ} {int(end.timestamp())} rc={rc}\n")
    if args.commit_logs:
        commit_logs(args.logs, f"Timing: tier {args.tier}, {name} " + (f"stopped by signal {stopped[0]}" if stopped
                                                                       else f"ended rc={rc}"))
    if stopped:
        raise Stopped(name)
    return rc


def wait_for_group(pgid: int, timeout: float = GROUP_EXIT_S) -> None:
    """Wait until no process of the stopped call's group is left (make can exit before Snakemake has
    finished shutting down its jobs, and their last lines belong before the end line); SIGKILL what
    outlives `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def made_elsewhere(args, names_and_targets) -> list[Path]:
    """The targets already in the results root of groups this timing has not started: Snakemake would
    find them up to date and train nothing (a checkout's committed results root, not a fresh one)."""
    root = ROOT / args.results / "embedded"
    return [root / t for name, targets in names_and_targets if not (args.logs / f"{name}.log").exists()
            for t in targets if (root / t).exists()]


def commit_logs(logs: Path, text: str) -> None:
    """Commit the timing's logs (each group's and load.log) where they lie, so that a timing that
    outlasts its machine resumes from them on the next (run_ledger.commit_paths)."""
    files = sorted(p for p in logs.glob("*.log") if p.is_file())
    if files:   # the lock in the repository's git folder: nothing untracked left beside the logs
        git_dir = subprocess.run(["git", "-C", str(logs), "rev-parse", "--absolute-git-dir"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        commit_paths(files, text, Path(git_dir) / "codist-timing.lock")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", required=True, help="the results root to replicate into (relative to the checkout)")
    p.add_argument("--tier", default="paper", choices=TIERS[1:])
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--logs", type=Path, default=None, help="default RESULTS/timing")
    p.add_argument("--only", nargs="*", default=None, help="these groups only (names as in the logs)")
    p.add_argument("--ledger", choices=["keep", "commit"], default=None, help="make's LEDGER= (workflows/run_ledger.py)")
    p.add_argument("--ledger-dir", type=Path, default=None, help="make's LEDGER_DIR= (default the results' own)")
    p.add_argument("--commit-logs", action="store_true",
                   help="commit the logs after each call (--logs inside a git checkout: a timing that outlasts its machine)")
    args = p.parse_args(argv)
    if args.ledger_dir and not args.ledger:
        p.error("--ledger-dir needs --ledger keep|commit")
    args.logs = args.logs or ROOT / args.results / "timing"
    args.logs.mkdir(parents=True, exist_ok=True)
    if args.commit_logs:
        try:
            repo_of(args.logs)
        except LedgerError:
            p.error(f"--commit-logs: {args.logs} is not inside a git checkout, so its logs cannot be committed")
    token = secrets.token_hex(8)
    env = {**os.environ, MARK: token}
    stale = foreign_warm_servers(token.encode())
    if stale:
        print(f"time_tier: codist warm server(s) already running (pid {', '.join(map(str, stale))}): the timing's "
              f"ranks would run in them, outside the timing, and count as foreign; stop them first", file=sys.stderr)
        return 2
    planned = groups(args.tier)
    there = made_elsewhere(args, planned)
    if there:
        print(f"time_tier: {there[0]} is already there and no call of this timing made it: Snakemake would find it "
              f"up to date and train nothing; time into a fresh results root (--results runs/<tier>-timing/results)",
              file=sys.stderr)
        return 2
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(args.logs / "load.log", token.encode(), stop), daemon=True)
    sampler.start()
    try:
        for name, targets in planned:
            if (args.only is not None and name not in args.only) or finished(args.logs / f"{name}.log"):
                continue
            print(f"{name}: {len(targets)} target(s)", flush=True)
            if call(name, targets, args, env) != 0:
                print(f"{name} failed: see {args.logs / f'{name}.log'}", file=sys.stderr)
                return 1
    except Stopped as e:
        print(f"{e}: stopped by a signal, its end line written; the same command resumes it", file=sys.stderr)
        return 1
    finally:
        stop.set()
        sampler.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
