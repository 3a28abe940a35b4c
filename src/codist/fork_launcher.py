"""`launch.launcher: fork`: start every rank of a single-node CPU run from ONE Python process.

    python -m codist.fork_launcher --nprocs N --master_port P -- --config RUN/config.yaml --out RUN

The DeepSpeed launcher and torchrun start one interpreter per rank, and each rank imports
torch, deepspeed, and, lazily while building its engine, torch._dynamo and fairseq (some 7 s
of CPU per rank; the launcher imports torch once more). Here the parent imports all of that
once (`preload`), then os.fork()s N children. Each child sets the env:// rendezvous torchrun
would set (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, ...), its torch
threads, and calls `codist.train.main`; its return value is the child's exit code.

The parent waits for the children. A child that fails (exit code other than 0 and
EXIT_PREEMPTED, or killed by a signal) gets the others SIGTERM, then SIGKILL after GRACE_S;
the parent then exits with the failed child's code (128 + signal for a killed one).
SIGTERM, SIGINT and SIGUSR1 received by the parent reach the children as SIGTERM: they
checkpoint and exit with EXIT_PREEMPTED, and so does the parent; a signal that reaches a child
before codist.train installed its handler is kept and honoured. The children stay in the
parent's process group, so `codist.launch`'s killpg on a hang reaches them; a child whose
parent dies is killed (PR_SET_PDEATHSIG, Linux). Started by a warm server (codist.warm_server),
`main` also watches its client's connection (`owner`): when the client goes away, the ranks
are stopped as on SIGTERM.

Fork safety: the parent only imports; it runs no torch op, so torch's OpenMP pool does not
exist when it forks (each child sets its own intra-op threads, `torch.set_num_threads`). The
threads that do exist then belong to libraries with fork handlers (numpy's OpenBLAS when
OMP_NUM_THREADS > 1; the jemalloc background thread of pyarrow, which fairseq imports): the
same state torch's DataLoader forks its workers from. CPU only: `codist.launch` refuses `fork`
for cuda (a forked child cannot use CUDA safely) and across several nodes.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time

from .exits import EXIT_PREEMPTED, STOP_SIGNALS as FORWARDED, from_wait_status

GRACE_S = 10.0        # after a failed rank: SIGTERM to the others, SIGKILL this much later


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="codist.fork_launcher", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, required=True, help="ranks to start on this machine")
    p.add_argument("--master_port", type=int, required=True, help="TCP port of rank 0's rendezvous store")
    p.add_argument("--master_addr", default="127.0.0.1")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then codist.train's arguments")
    args = p.parse_args(argv)
    if args.train_args[:1] == ["--"]:
        args.train_args = args.train_args[1:]
    if args.nprocs < 1:
        p.error("--nprocs must be at least 1")
    return args


def preload(train_args: list[str]) -> None:
    """Import, once, what every rank imports: torch, deepspeed, codist.train, the run's
    workload module (codist.workloads imports it lazily), and what the ranks' first engine and
    optimizer import lazily: torch._dynamo (torch.optim's constructors, ~2 s),
    torch.utils.cpp_extension, and fairseq's optimizer base class where the ranks would import
    it (DeepSpeed's engine tries it, ~3 s, unless codist.engine.without_fairseq hides it).
    Imports only: no torch op runs here."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import deepspeed  # noqa: F401
    import deepspeed.comm  # noqa: F401
    from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401  (setuptools: DeepSpeed loads its CPU comm op with it)
    import torch.utils.tensorboard  # noqa: F401  (rank 0's event file, codist.runlog; ~0.3 s, no threads until used)
    from . import config  # first: it loads CODIST_PLUGINS, whose algorithms import the engine
    from . import engine, train
    name, workload = None, None   # the run's workload and its config class, from the raw YAML: no
    try:   # validation here (a warm server's main loop); none for a warm server's first preload
        from .workloads import REGISTRY
        if train_args:
            name = (config.load_raw(train.parse_args(train_args).config).get("workload") or {}).get("name", "cifar")
            workload = REGISTRY[name][0]
    except (Exception, SystemExit):   # the rank reports a bad config itself, with its own error path
        pass
    if not hasattr(engine, "without_fairseq") or (workload is not None and workload.needs_fairseq):
        import logging
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        try:
            from fairseq.optim.fairseq_optimizer import FairseqOptimizer  # noqa: F401
        except Exception:
            pass
        root.setLevel(level)   # importing fairseq sets up root logging at DEBUG: the ranks' filelock etc. chatter
        root.handlers[:] = handlers
    if workload is not None:
        from .workloads import workload_class
        workload_class(name)
    warm_deepspeed_ops()


def warm_deepspeed_ops() -> None:
    """Fill two module-level caches of DeepSpeed that every rank's engine would fill again: the
    op compatibility probe (compiler subprocesses) and its CPU comm op (a ninja up-to-date check
    and the library's load), about 0.13 s per rank. Neither runs a torch op."""
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator
    if get_accelerator().device_name() != "cpu":
        return
    compatible = deepspeed.ops.__compatible_ops__
    builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
    if builder is not None and compatible.get(builder.NAME, False):
        builder.load(verbose=False)


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:          # the parent died before prctl took effect
        os._exit(1)


def child(rank: int, args, parent: int, early: list) -> int:
    """One rank, in a forked child; returns the exit code (never raises)."""
    try:
        _die_with_parent(parent)
        n = str(args.nprocs)
        os.environ.update({   # what torchrun sets on one node
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n,
            "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": n,
            "MASTER_ADDR": args.master_addr, "MASTER_PORT": str(args.master_port),
        })
        # not the DeepSpeed launcher's LOCAL_SIZE: with it, DeepSpeed's CPU comm op creates a 69 MB
        # /dev/shm workspace per rank (for inference_all_reduce, which codist never calls) and
        # never unlinks it
        os.environ.pop("LOCAL_SIZE", None)
        import torch
        threads = int(os.environ.get("CODIST_THREADS_PER_RANK") or os.environ.get("OMP_NUM_THREADS") or 1)
        torch.set_num_threads(threads)
        from . import train
        if hasattr(train, "StopFlag"):
            # a stop signal that arrived before the rank installed its own handler is honoured
            base = train.StopFlag

            class EarlyStopFlag(base):
                def __init__(self):
                    super().__init__()
                    if early:
                        self.raised = 1
            train.StopFlag = EarlyStopFlag
        argv = [*args.train_args, f"--local_rank={rank}"]
        sys.argv = [train.__file__, *argv]   # what the manifest records as the rank's command
        code = train.main(argv)
        return code if isinstance(code, int) else 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        sys.excepthook(*sys.exc_info())   # the rank's heartbeat hook records the error, then the traceback
        return 1


def sigchld_wakeup() -> tuple[int, int]:
    """(read, write) ends of a pipe that every signal, SIGCHLD included, writes a byte to: a
    select() on the read end wakes when a child exits (the warm server's and supervisor's waits)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda s, f: None)   # a handler, so the signal reaches the wakeup fd
    return wake_r, wake_w


class OwnerWatch:
    """The warm server's client connection: it sends nothing after its request, so the socket
    turns readable only when the client is gone. SIGCHLD wakes the wait through a pipe."""

    def __init__(self, owner):
        self.owner, self.gone = owner, False
        self.wake_r, _ = sigchld_wakeup()

    def wait(self, timeout: float) -> bool:
        """Block until a child may have exited or `timeout`; True once the owner has gone."""
        watch = [self.wake_r] if self.gone else [self.wake_r, self.owner]
        ready, _, _ = select.select(watch, [], [], timeout)
        if self.wake_r in ready:
            os.read(self.wake_r, 4096)
        if self.owner in ready:   # end of stream (or a reset): nobody waits for this run any more
            self.gone = True
            return True
        return False


def main(argv=None, owner=None) -> int:
    """`owner`: the warm server's connection to the client that asked for this run."""
    args = parse_args(argv)
    preload(args.train_args)
    watch = OwnerWatch(owner) if owner is not None else None
    parent = os.getpid()
    alive: dict[int, int] = {}              # pid -> rank of the children not reaped yet (no reused pids)
    stopping: list[int] = []                # signals received by the parent

    def signal_alive(sig: int) -> None:
        for pid in list(alive):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def forward(signum, frame):
        stopping.append(signum)
        signal_alive(signal.SIGTERM)
    for s in FORWARDED:
        signal.signal(s, forward)

    for rank in range(args.nprocs):
        early = list(stopping)   # a stop signal already received: this rank starts stopping
        sys.stdout.flush()
        sys.stderr.flush()
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)   # no handler runs half-way through fork
        pid = os.fork()
        if pid == 0:   # the rank: a stop signal is remembered until codist.train installs its handler
            signal.signal(signal.SIGTERM, lambda s, f: early.append(s))
            signal.signal(signal.SIGUSR1, lambda s, f: early.append(s))
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent forwards it as SIGTERM
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
            code = child(rank, args, parent, early)
            flush_std()   # no atexit: the parent's handlers are not the rank's
            os._exit(code)
        alive[pid] = rank
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

    codes: dict[int, int] = {}
    failed: int | None = None
    kill_at: float | None = None
    while len(codes) < args.nprocs:
        if kill_at is None and watch is None:
            pid, status = os.waitpid(-1, 0)
        else:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if kill_at is not None and time.monotonic() >= kill_at:
                    signal_alive(signal.SIGKILL)
                    kill_at = float("inf")
                if watch is None:
                    time.sleep(0.05)
                elif watch.wait(0.05 if kill_at is not None else 1.0) and kill_at is None:
                    print("codist.fork_launcher: the client that started this run is gone; stopping the ranks",
                          file=sys.stderr)
                    signal_alive(signal.SIGTERM)
                    kill_at = time.monotonic() + GRACE_S
                continue
        if pid not in alive:
            continue
        rank, code = alive.pop(pid), from_wait_status(status)
        codes[rank] = code
        if code not in (0, EXIT_PREEMPTED) and failed is None:
            failed = rank
            print(f"codist.fork_launcher: rank {rank} (pid {pid}) exited with code {code}; "
                  f"stopping the other ranks", file=sys.stderr)
            signal_alive(signal.SIGTERM)
            kill_at = time.monotonic() + GRACE_S
    if failed is not None:
        return codes[failed]
    if any(c == EXIT_PREEMPTED for c in codes.values()):
        return EXIT_PREEMPTED
    return 0


class ForkedRun:
    """`main(argv, owner)` in a forked child with environment `env` and its own process group (a
    killpg reaches it and its ranks, not the caller): `codist run` inside a warm server's
    supervisor (codist.warm_cli) starts its ranks this way, with the calls `codist.launch` makes on
    a Popen: `pid`, `wait`, `send_signal`, `returncode` (-N for a child killed by signal N)."""

    def __init__(self, argv: list[str], env: dict[str, str], owner=None):
        self.returncode: int | None = None
        flush_std()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgid(0, 0)
                os.environ.clear()
                os.environ.update(env)
                code = main(argv, owner=owner)
            except BaseException:
                import traceback
                traceback.print_exc()
            flush_std()
            os._exit(code)
        self.pid = pid
        try:   # from this side too, so that a killpg right after this returns finds the group
            os.setpgid(pid, pid)
        except OSError:   # the child did it already, or has exited
            pass

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)   # Popen's: -N for signal N
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                import subprocess
                raise subprocess.TimeoutExpired(["codist.fork_launcher", str(self.pid)], timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


def flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def exit_now(code: int) -> None:
    """Exit now: tearing down an interpreter that imported torch, deepspeed and fairseq takes
    seconds (module finalisation) and buys nothing here."""
    import atexit
    atexit._run_exitfuncs()
    flush_std()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
