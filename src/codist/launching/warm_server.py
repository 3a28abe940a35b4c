"""`launch.launcher: warm`: one process imports torch, DeepSpeed and codist once, then starts
many runs, each as the fork launcher would (codist.launching.fork), without paying the imports again.

    python -m codist.launching.warm_server --socket PATH [--idle_s 300]   (codist.launching.warm_client starts it)

`codist run` (its WarmLauncher, through codist.launching.warm_client) connects over a Unix socket
and sends the fork launcher's arguments, the ranks' environment and its working directory. The
server imports the run's workload (the arguments name it: the server never reads a config and
never runs a torch op, so there is no OpenMP pool or other state to inherit), then forks a
*supervisor* for the run: a new session (a killpg reaches that run's ranks and nothing else),
which answers its pid, receives the client's stdout/stderr (SCM_RIGHTS), takes the environment
and cwd, runs `fork.main` (which forks the ranks) and answers its exit code; the server answers
128 + N for a supervisor killed by signal N. The client supervises the run as any other tree
(codist.launching.supervise); the ranks stop without it (codist.owner).

One server per socket, i.e. per key (`server_key`), guaranteed by an exclusive lock on PATH.lock
held for the server's life. It exits after `idle_s` with no run alive; SIGTERM/SIGINT stop it
accepting and it exits once its runs have ended.

Trust: the socket lies in a folder of this user's, mode 0700 (`owner.private_dir`, checked by both
ends); the lock and log files are opened without following links. A caller whose credentials
(SO_PEERCRED) name another user is refused at accept, whatever the folder's mode; a request runs
only with the import-time environment of this server's key. Requests are read without blocking
(one idle connection delays nobody, and is dropped after REQUEST_TIMEOUT_S). The supervisor, not
the server, answers its own pid (after setsid, so the client can check it is the server's child
leading its own session) and its exit code (the client does not depend on the server once the
run started); a supervisor whose client has already gone (a request queued while the server was
stopped) starts nothing.

Why our own server rather than a library: the runs must fork from a process that holds the
imports (fork's copy-on-write), which a process pool or a job runner does not give with per-run
sessions, output and signals.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from pathlib import Path

from ..exits import from_wait_status
from ..owner import UntrustedPath, open_private, private_dir
from . import fork

HEADER = struct.Struct("!I")   # length of the JSON message that follows
MAX_FDS = 2                    # the client's stdout and stderr
REQUEST_TIMEOUT_S = 10.0       # a client that connects must send its request within this
MAX_MESSAGE = 16 << 20         # a request's JSON (argv, environment) is a few kB
PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


# environment variables read while torch, numpy (OpenBLAS) and DeepSpeed import
# (and CODIST_PLUGINS: the server imports those modules with codist.config)
IMPORT_ENV_PREFIXES = ("OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH", "DS_", "CUDA", "PYTHON", "LD_", "NCCL_",
                       "CODIST_PLUGINS")


def plugin_files(env: dict[str, str]) -> list[str]:
    """The files of the CODIST_PLUGINS modules (comma-separated module names) where the server
    would find them (its PYTHONPATH, then this interpreter's path), looked up without importing
    anything; a module not found adds nothing."""
    from importlib.machinery import PathFinder
    files = []
    for name in (n.strip() for n in env.get("CODIST_PLUGINS", "").split(",")):
        search = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + sys.path
        parts, spec = name.split("."), None
        for i in range(len(parts) if name else 0):
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), search)
            if spec is None:
                break
            search = list(spec.submodule_search_locations or [])
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            files.append(spec.origin)
    return files


def server_key(env: dict[str, str]) -> str:
    """The key of the server whose imports fit `env`: the interpreter, the codist sources' and the
    CODIST_PLUGINS modules' files (path, size, mtime: an edited file gets a new server, never stale
    code) and the environment read at import time (threads, accelerator, paths)."""
    h = hashlib.sha256(sys.executable.encode())
    package = Path(__file__).resolve().parents[1]   # all of codist
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for path in plugin_files(env):
        st = os.stat(path)
        h.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for name in sorted(env):
        if name.startswith(IMPORT_ENV_PREFIXES):
            h.update(f"{name}={env[name]}\n".encode())
    return h.hexdigest()[:16]


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket, from the kernel: the
    client for the server, the process that listened (the server) for the client."""
    return PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))


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
        self.sock, self.buf, self.fds, self.ended = sock, b"", [], False

    def complete(self) -> dict | None:
        """A whole message already received, or None."""
        if len(self.buf) >= HEADER.size:
            size = HEADER.unpack_from(self.buf)[0]
            if size > MAX_MESSAGE:
                raise ValueError(f"a message of {size} bytes (at most {MAX_MESSAGE})")
            end = HEADER.size + size
            if len(self.buf) >= end:
                message, self.buf = json.loads(self.buf[HEADER.size:end]), self.buf[end:]
                return message
        return None

    def receive(self) -> None:
        """One read (blocks unless the socket is ready or non-blocking); sets `ended` at the end of the stream."""
        chunk, fds, _, _ = socket.recv_fds(self.sock, 65536, MAX_FDS)
        self.fds += fds
        self.ended = not chunk
        self.buf += chunk

    def read(self) -> dict | None:
        """The next message, or None at the end of the stream."""
        while (message := self.complete()) is None:
            self.receive()
            if self.ended:
                return None
        return message

    def take_fds(self) -> list[int]:
        fds, self.fds = self.fds, []
        return fds


def client_gone(conn: socket.socket) -> bool:
    """The client sends nothing after its request: a readable connection is an ended (or reset) one."""
    try:
        ready, _, _ = select.select([conn], [], [], 0)
        return bool(ready) and conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except OSError:
        return True


def request_error(request: dict, key: str) -> str | None:
    """Why the supervisor must not run `request`, or None: only the fork launcher's arguments run,
    and only with the import-time environment of this server's key."""
    if set(request) != {"argv", "env", "cwd"}:
        return f"a request carries the fork launcher's 'argv', 'env' and 'cwd', not {sorted(request)}"
    if server_key(request["env"]) != key:
        return "the request's import-time environment does not match this server's key"
    return None


def output_fds(conn: socket.socket) -> list[int]:
    """The client's stdout and stderr, sent (SCM_RIGHTS) after it checked the supervisor's pid."""
    conn.settimeout(REQUEST_TIMEOUT_S)
    reader = MessageReader(conn)
    message = reader.read()
    fds = reader.take_fds()
    conn.settimeout(None)
    if message != {"output": True} or len(fds) != MAX_FDS:
        raise RuntimeError(f"expected the client's stdout and stderr, got {message!r} with {len(fds)} fds")
    return fds


class Server:
    def __init__(self, path: Path, idle_s: float):
        self.path, self.idle_s = path, idle_s
        self.runs: dict[int, socket.socket] = {}   # supervisor pid -> its client's connection
        self.pending: dict[socket.socket, tuple[MessageReader, float]] = {}   # -> (its reader, deadline)
        self.stopping = False

    def supervise(self, conn: socket.socket, request: dict) -> None:
        """In the forked supervisor: become the run's session, take the client's output,
        environment and cwd, start the ranks; never returns. Answers its own pid first (then
        receives the client's stdout and stderr) and its exit code last."""
        code = 1
        try:
            os.close(signal.set_wakeup_fd(-1))   # the server's pipe (fork.main makes its own)
            for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(s, signal.SIG_DFL)
            self.listener.close()
            os.close(self.lock_fd)   # the server's alone: a new server can start while this run goes on
            os.close(self.wake_r)
            for other in [*self.runs.values(), *self.pending]:
                other.close()
            os.setsid()
            refused = request_error(request, self.path.stem)
            if refused or client_gone(conn):   # gone: queued while the server was stopped, say
                print(f"codist.warm_server: supervisor {os.getpid()}: "
                      f"{refused or 'the client has gone'}; nothing started", file=sys.stderr, flush=True)
                if refused:
                    send_message(conn, {"refused": refused})
                os._exit(1)
            send_message(conn, {"pid": os.getpid()})   # a session leader, child of the server: the client checks
            fds = output_fds(conn)   # only now: a client gone meanwhile left no fds of its in our queue
            for target, fd in zip((1, 2), fds):
                os.dup2(fd, target)
                os.close(fd)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            code = fork.main(request["argv"], imported=True)
        except BaseException:
            traceback.print_exc()
        fork.flush_std()
        try:
            send_message(conn, {"rc": code})   # from here: the client needs no server to learn it
        except OSError:
            pass
        os._exit(code)   # not the server's atexit handlers: they belong to the server

    def accept(self) -> None:
        """A new connection: refused unless its process runs as this user; its request is read
        as it arrives (`receive`), so a slow or idle client blocks nobody."""
        conn, _ = self.listener.accept()
        pid, uid, _ = peer_credentials(conn)
        if uid != os.geteuid():
            print(f"codist.warm_server: refused a connection from pid {pid}, uid {uid}: this server "
                  f"serves uid {os.geteuid()} only", file=sys.stderr, flush=True)
            conn.close()
            return
        conn.setblocking(False)
        self.pending[conn] = (MessageReader(conn), time.monotonic() + REQUEST_TIMEOUT_S)

    def receive(self, conn: socket.socket) -> None:
        reader, _ = self.pending[conn]
        try:
            reader.receive()
            request = reader.complete()
        except (OSError, ValueError) as e:
            print(f"codist.warm_server: bad request: {e}", file=sys.stderr, flush=True)
            request, reader.ended = None, True
        if request is None and not reader.ended:
            return   # more to come
        del self.pending[conn]
        for fd in reader.take_fds():   # the output comes once the client has checked the supervisor
            os.close(fd)
        if not isinstance(request, dict):
            conn.close()
            return
        conn.setblocking(True)
        self.start_run(conn, request)

    def drop_late(self) -> None:
        now = time.monotonic()
        for conn, (reader, deadline) in list(self.pending.items()):
            if now > deadline:
                print(f"codist.warm_server: no request within {REQUEST_TIMEOUT_S:.0f} s; connection closed",
                      file=sys.stderr, flush=True)
                del self.pending[conn]
                for fd in reader.take_fds():
                    os.close(fd)
                conn.close()

    def start_run(self, conn: socket.socket, request: dict) -> None:
        try:   # what the run's ranks import (its workload, fairseq for translation): cached for the next runs
            fork.preload(fork.parse_args(request["argv"]).workload)
        except BaseException:
            traceback.print_exc()   # the run reports its own error
        fork.flush_std()
        pid = os.fork()
        if pid == 0:
            self.supervise(conn, request)
        self.runs[pid] = conn

    def reap(self) -> None:
        while self.runs:   # a supervisor not reaped yet: waitpid has a child to wait for
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            conn = self.runs.pop(pid, None)
            if conn is not None:
                try:   # the supervisor answered its own code unless a signal killed it
                    send_message(conn, {"rc": from_wait_status(status)})
                except OSError:
                    pass
                conn.close()
            self.last_active = time.monotonic()

    def serve(self) -> int:
        try:
            private_dir(self.path.parent)
            self.lock_fd = open_private(Path(f"{self.path}.lock"), os.O_RDWR)
        except (UntrustedPath, OSError) as e:
            print(f"codist.warm_server: {e}", file=sys.stderr)
            return 1
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0   # another server holds this socket
        os.ftruncate(self.lock_fd, 0)
        os.write(self.lock_fd, f"{os.getpid()}\n".encode())   # who serves this socket (tests and `kill` read it)
        self.path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.listener.listen(64)
        inode = self.path.stat().st_ino
        print(f"codist.warm_server: pid {os.getpid()} listening on {self.path}", file=sys.stderr, flush=True)
        fork.preload()   # torch, deepspeed, codist.rank.train; clients queue meanwhile
        self.wake_r = fork.sigchld_wakeup()

        def stop(signum, frame):
            self.stopping = True
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.last_active = time.monotonic()
        try:
            while True:
                self.reap()
                self.drop_late()
                idle = not self.runs and not self.pending and time.monotonic() - self.last_active > self.idle_s
                if (self.stopping and not self.runs) or idle:
                    return 0
                watch = [self.wake_r, *self.pending] + ([] if self.stopping else [self.listener])
                ready, _, _ = select.select(watch, [], [], 1.0)
                if self.wake_r in ready:
                    os.read(self.wake_r, 4096)
                for conn in ready:
                    if conn in self.pending:
                        self.receive(conn)
                if self.listener in ready:
                    self.accept()
                    self.last_active = time.monotonic()
        finally:
            try:   # a newer server may own the path by now
                if self.path.stat().st_ino == inode:
                    self.path.unlink()
            except FileNotFoundError:
                pass
            self.listener.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="codist.launching.warm_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", required=True, type=Path, help="Unix socket path (its .lock beside it)")
    p.add_argument("--idle_s", type=float, default=300.0, help="exit after this long with no run")
    args = p.parse_args(argv)
    return Server(args.socket, args.idle_s).serve()


if __name__ == "__main__":
    fork.exit_now(main())
