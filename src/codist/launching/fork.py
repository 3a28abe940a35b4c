"""`launch.launcher: fork`: start every rank of a single-node CPU run from ONE Python process.

    python -m codist.launching.fork --nprocs N --master_port P --workload W -- --config RUN/config.yaml --out RUN

The DeepSpeed launcher and torchrun start one interpreter per rank, and each rank imports
torch, deepspeed, and, lazily while building its engine, torch._dynamo and fairseq (some 7 s
of CPU per rank). Here the parent imports all of that once (`preload`; W: the run's workload,
so the parent never reads the config), then os.fork()s N children. Each child sets the env://
rendezvous torchrun would set (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
MASTER_PORT, ...), its torch threads, and calls `codist.rank.train.main`; its return value is the
child's exit code. A warm server (codist.launching.warm_server) runs `main` in a supervisor it
forks, with the imports already made.

The parent waits for the children. A child that fails (exit code other than 0 and
EXIT_PREEMPTED, or killed by a signal) gets the others SIGTERM, then SIGKILL after GRACE_S;
the parent then exits with the failed child's code (128 + signal for a killed one).
SIGTERM, SIGINT and SIGUSR1 received by the parent reach the children as SIGTERM, again every
RESEND_S until they exit (a child ignores stop signals until codist.rank.train installs its handler):
they checkpoint and exit with EXIT_PREEMPTED, and so does the parent. The children stay in the
parent's process group, so a killpg reaches them; a child whose parent dies is killed
(PR_SET_PDEATHSIG, Linux).

Fork safety: the parent only imports; it runs no torch op, so torch's OpenMP pool does not
exist when it forks (each child sets its own intra-op threads, `torch.set_num_threads`). The
threads that do exist then belong to libraries with fork handlers (numpy's OpenBLAS when
OMP_NUM_THREADS > 1; the jemalloc background thread of pyarrow, which fairseq imports): the
same state torch's DataLoader forks its workers from. CPU only: codist.launching refuses `fork`
and `warm` for cuda (a forked child cannot use CUDA safely) and across several nodes.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time

from ..exits import EXIT_PREEMPTED, STOP_SIGNALS, from_wait_status
from ..rank_env import local_rank_env

GRACE_S = 10.0        # after a failed rank: SIGTERM to the others, SIGKILL this much later
RESEND_S = 2.0        # while stopping: SIGTERM to the ranks again this often


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="codist.launching.fork", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, required=True, help="ranks to start on this machine")
    p.add_argument("--master_port", type=int, required=True, help="TCP port of rank 0's rendezvous store")
    p.add_argument("--master_addr", default="127.0.0.1")
    p.add_argument("--workload", default=None, help="the run's workload (its module is imported once)")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then codist.rank.train's arguments")
    args = p.parse_args(argv)
    if args.train_args[:1] == ["--"]:
        args.train_args = args.train_args[1:]
    if args.nprocs < 1:
        p.error("--nprocs must be at least 1")
    return args


def preload(workload: str | None = None) -> None:
    """Import, once, what every rank imports: torch, deepspeed, codist.rank.train, the workload's
    module (codist.workloads imports it lazily), and what the ranks' first engine and optimizer
    import lazily: torch._dynamo (torch.optim's constructors, ~2 s), torch.utils.cpp_extension,
    and fairseq's optimizer base class for a workload that `needs_fairseq` (DeepSpeed's engine
    tries it, ~3 s; codist.runtime.engine hides it from the others). Imports only: no torch op runs here."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import deepspeed  # noqa: F401
    import deepspeed.comm  # noqa: F401
    from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401  (setuptools: DeepSpeed loads its CPU comm op with it)
    import torch.utils.tensorboard  # noqa: F401  (rank 0's event file, codist.runlog; ~0.3 s, no threads until used)
    from .. import config  # noqa: F401  (first: it loads CODIST_PLUGINS, whose algorithms import the engine)
    from ..rank import train  # noqa: F401
    from ..workloads import REGISTRY, workload_class
    if workload in REGISTRY and REGISTRY[workload][0].needs_fairseq:
        import logging
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        try:
            from fairseq.optim.fairseq_optimizer import FairseqOptimizer  # noqa: F401
        except Exception:
            pass
        root.setLevel(level)   # importing fairseq sets up root logging at DEBUG: the ranks' filelock etc. chatter
        root.handlers[:] = handlers
    if workload in REGISTRY:
        workload_class(workload)
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


def child(rank: int, args, parent: int) -> int:
    """One rank, in a forked child; returns the exit code (never raises)."""
    try:
        _die_with_parent(parent)
        os.environ.update(local_rank_env(rank, args.nprocs, args.master_port, args.master_addr))
        # not the DeepSpeed launcher's LOCAL_SIZE: with it, DeepSpeed's CPU comm op creates a 69 MB
        # /dev/shm workspace per rank (for inference_all_reduce, which codist never calls) and
        # never unlinks it
        os.environ.pop("LOCAL_SIZE", None)
        import torch
        threads = int(os.environ.get("CODIST_THREADS_PER_RANK") or os.environ.get("OMP_NUM_THREADS") or 1)
        torch.set_num_threads(threads)
        from ..rank import train
        argv = [*args.train_args, f"--local_rank={rank}"]
        sys.argv = [train.__file__, *argv]   # what the manifest records as the rank's command
        return train.main(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        sys.excepthook(*sys.exc_info())   # the rank's heartbeat hook records the error, then the traceback
        return 1


def sigchld_wakeup() -> int:
    """The read end of a pipe that every signal, SIGCHLD included, writes a byte to: a select()
    on it wakes when a child exits (the fork launcher's and the warm server's waits)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda s, f: None)   # a handler, so the signal reaches the wakeup fd
    return wake_r


def main(argv=None, imported: bool = False) -> int:
    """`imported`: `preload` already ran in this process (a warm server's supervisor)."""
    args = parse_args(argv)
    if not imported:
        preload(args.workload)
    parent = os.getpid()
    alive: dict[int, int] = {}              # pid -> rank of the children not reaped yet (no reused pids)
    stopping: list[float] = []              # when the ranks were last told to stop

    def signal_alive(sig: int) -> None:
        for pid in alive:   # not reaped yet, so never a reused pid and never ProcessLookupError
            os.kill(pid, sig)

    def forward(signum=None, frame=None):
        stopping[:] = [time.monotonic()]
        signal_alive(signal.SIGTERM)
    for s in STOP_SIGNALS:
        signal.signal(s, forward)
    wake_r = sigchld_wakeup()

    for rank in range(args.nprocs):
        flush_std()   # what is buffered is written once, not once more by every child
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)   # no handler runs half-way through fork
        pid = os.fork()
        if pid == 0:   # the rank: stop signals wait for codist.rank.train's handler (the parent sends them again)
            for s in STOP_SIGNALS:
                signal.signal(s, signal.SIG_IGN)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            code = child(rank, args, parent)
            flush_std()   # no atexit: the parent's handlers are not the rank's
            os._exit(code)
        alive[pid] = rank
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    codes: dict[int, int] = {}
    failed: int | None = None
    kill_at = float("inf")
    while alive:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            if now >= kill_at:
                signal_alive(signal.SIGKILL)
                kill_at = float("inf")
            elif stopping and now - stopping[0] >= RESEND_S:
                forward()
            if select.select([wake_r], [], [], 0.5)[0]:
                os.read(wake_r, 4096)
            continue
        if pid not in alive:
            continue
        rank, code = alive.pop(pid), from_wait_status(status)
        codes[rank] = code
        if code not in (0, EXIT_PREEMPTED) and failed is None:
            failed = rank
            print(f"codist.launching.fork: rank {rank} (pid {pid}) exited with code {code}; "
                  f"stopping the other ranks", file=sys.stderr)
            signal_alive(signal.SIGTERM)
            kill_at = time.monotonic() + GRACE_S
    if failed is not None:
        return codes[failed]
    return EXIT_PREEMPTED if EXIT_PREEMPTED in codes.values() else 0


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
