"""`launch.launcher: warm`: one process imports torch, DeepSpeed and codist once, then starts
many runs, each as `fork` would (codist.fork_launcher), without paying the imports again.

    python -m codist.warm_server --socket PATH [--idle_s 300]    (codist.warm_client starts it)

`codist run` (codist.warm_client) connects over a Unix socket and sends the fork launcher's
arguments, its environment and working directory, and its stdout/stderr (SCM_RIGHTS). The
server imports what the run's workload needs (imports only: it never runs a torch op, so
there is no OpenMP pool or other state to inherit), then forks a *supervisor* for the run: a
new session (so a killpg reaches that run's ranks and nothing else), the client's
environment, cwd and output, then `fork_launcher.main`, which forks the ranks. The server
answers the supervisor's pid at once and, when it reaps the supervisor, its exit code (128 + N
for a signal). If the client goes away (kill -9 of `codist run`, Snakemake cancelling the
job), the supervisor stops its ranks as on SIGTERM: checkpoint, exit 3, SIGKILL after a grace.
A "cli" request (codist.warm_cli) carries `codist run`'s own command line instead: the supervisor
runs that command (validation, the directory lock, the launch, the watchdog) with the server's
imports, and the client only waits.

Why our own server rather than a library: the runs must fork from a process that holds the
imports (fork's copy-on-write), which a process pool or a job runner does not give with
per-run sessions, output and signals.

One server per socket, i.e. per key (codist.warm_client: the codist sources, the interpreter
and the import-time environment), guaranteed by an exclusive lock on PATH.lock held for the
server's life. It exits after `idle_s` with no run alive; SIGTERM/SIGINT stop it accepting and
it exits once its runs have ended.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from . import fork_launcher

HEADER = struct.Struct("!I")   # length of the JSON message that follows
MAX_FDS = 2                    # the client's stdout and stderr
REQUEST_TIMEOUT_S = 10.0       # a client that connects must send its request within this
RETRY_COLD = 75                # `codist run` in a supervisor: this server's imports do not fit; run it yourself


@dataclass(frozen=True)
class Supervised:
    """Set in a supervisor that runs `codist run` itself (a "cli" request): the client's connection
    and this server's key (codist.launch starts the ranks in-process, or answers RETRY_COLD)."""
    conn: socket.socket
    key: str


supervised: Supervised | None = None


def send_message(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = HEADER.pack(len(data)) + data
    if fds:   # the fds travel with the first bytes
        payload = payload[socket.send_fds(sock, [payload], list(fds)):]
    sock.sendall(payload)


class MessageReader:
    """Length-prefixed JSON messages from a stream socket, with the fds that came with them
    (two messages may arrive in one read: a run that ends at once)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf, self.fds = sock, b"", []

    def read(self) -> dict | None:
        """The next message, or None at the end of the stream."""
        while True:
            if len(self.buf) >= HEADER.size:
                end = HEADER.size + HEADER.unpack_from(self.buf)[0]
                if len(self.buf) >= end:
                    message, self.buf = json.loads(self.buf[HEADER.size:end]), self.buf[end:]
                    return message
            chunk, fds, _, _ = socket.recv_fds(self.sock, 65536, MAX_FDS)
            self.fds += fds
            if not chunk:
                return None
            self.buf += chunk

    def take_fds(self) -> list[int]:
        fds, self.fds = self.fds, []
        return fds


def exit_code(status: int) -> int:
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


class Server:
    def __init__(self, path: Path, idle_s: float):
        self.path, self.idle_s = path, idle_s
        self.runs: dict[int, socket.socket] = {}   # supervisor pid -> its client's connection
        self.stopping = False

    def supervise(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        """In the forked supervisor: become the run's session, take the client's output,
        environment and cwd, start the ranks (or run the client's `codist run` itself, which
        starts them: codist.warm_cli); never returns."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(s, signal.SIG_DFL)
            self.listener.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            for other in self.runs.values():
                other.close()
            os.setsid()
            for target, fd in zip((1, 2), fds):
                os.dup2(fd, target)
                os.close(fd)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            if "cli" in request:   # `codist run` itself, with the imports it would pay for at start-up
                from . import cli, owner
                from . import warm_server as importable   # not __main__: the module codist.launch reads
                importable.supervised = importable.Supervised(conn, self.path.stem)
                owner.client_pid = request["pid"]   # the ranks' owner and the lock's holder: the client
                code = cli.main(request["cli"], launched_unix=request["launched_unix"])
            else:
                code = fork_launcher.main(request["argv"], owner=conn)
        except BaseException:
            traceback.print_exc()
        fork_launcher.flush_std()
        os._exit(code)   # not the server's atexit handlers: they belong to the server

    def start_run(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_TIMEOUT_S)
        reader = MessageReader(conn)
        try:
            request = reader.read()
        except (OSError, ValueError) as e:
            print(f"codist.warm_server: bad request: {e}", file=sys.stderr)
            request = None
        fds = reader.take_fds()
        if request is None or len(fds) != MAX_FDS:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        conn.settimeout(None)
        try:   # what the run's ranks import (its workload, fairseq for translation): cached for the next runs
            train_args = (["--config", request["config"], "--out", request["cwd"]] if "cli" in request
                          else fork_launcher.parse_args(request["argv"]).train_args)
            fork_launcher.preload(train_args)
        except BaseException:
            traceback.print_exc()   # the run reports its own error
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.supervise(conn, request, fds)
        for fd in fds:
            os.close(fd)
        self.runs[pid] = conn
        try:
            send_message(conn, {"pid": pid})
        except OSError:
            pass   # the client is gone; the supervisor notices and stops its ranks

    def reap(self) -> None:
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.runs.pop(pid, None)
            if conn is not None:
                try:
                    send_message(conn, {"rc": exit_code(status)})
                except OSError:
                    pass
                conn.close()
            self.last_active = time.monotonic()

    def serve(self) -> int:
        lock = open(f"{self.path}.lock", "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0   # another server holds this socket
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")   # who serves this socket (tests and `kill` read it)
        lock.flush()
        self.path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(64)
        inode = self.path.stat().st_ino
        print(f"codist.warm_server: pid {os.getpid()} listening on {self.path}", file=sys.stderr, flush=True)
        fork_launcher.preload([])   # torch, deepspeed, codist.train; clients queue meanwhile
        self.wake_r, self.wake_w = fork_launcher.sigchld_wakeup()

        def stop(signum, frame):
            self.stopping = True
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.last_active = time.monotonic()
        try:
            while True:
                self.reap()
                idle = not self.runs and time.monotonic() - self.last_active > self.idle_s
                if (self.stopping and not self.runs) or idle:
                    return 0
                watch = [self.wake_r] + ([] if self.stopping else [self.listener])
                ready, _, _ = select.select(watch, [], [], 1.0)
                if self.wake_r in ready:
                    os.read(self.wake_r, 4096)
                if self.listener in ready:
                    conn, _ = self.listener.accept()
                    self.last_active = time.monotonic()
                    self.start_run(conn)
        finally:
            try:   # a newer server may own the path by now
                if self.path.stat().st_ino == inode:
                    self.path.unlink()
            except FileNotFoundError:
                pass
            self.listener.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="codist.warm_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", required=True, type=Path, help="Unix socket path (its .lock beside it)")
    p.add_argument("--idle_s", type=float, default=300.0, help="exit after this long with no run")
    args = p.parse_args(argv)
    return Server(args.socket, args.idle_s).serve()


if __name__ == "__main__":
    fork_launcher.exit_now(main())
