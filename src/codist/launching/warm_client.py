"""`codist run`'s side of `launch.launcher: warm`: find (or start) the warm server for this
code and environment, hand it one run, and wait for it like a subprocess.

The socket is keyed by everything the server's imports depend on (`warm_server.server_key`:
the interpreter, the codist sources and the CODIST_PLUGINS modules' files, the environment read
at import time). Runs with the same key share one server; a stale one idles out (codist.launching.warm_server).

Trust: the socket's folder must be this user's own, mode 0700 (`owner.private_dir`); the
process listening on the socket must run as this user (SO_PEERCRED), checked before the request
(environment, output) is sent. The run's pid is signalled only while it is the server's child
leading its own session, with the start time seen when the run began. A server that cannot be
used (untrusted folder, another user's socket, a socket path too long for AF_UNIX, a stopped
server, no answer) raises WarmUnavailable once, with one line; later tries in this process fail
at once with the same line, and the WarmLauncher (codist.launching.launchers) runs the fork
launcher itself.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..owner import UntrustedPath, open_private, private_dir, proc_stat
from .warm_server import (MessageReader, peer_credentials, send_message,
                          server_key)

CONNECT_TIMEOUT_S = 120.0   # a new server listens within a second; the budget is for a loaded machine
POLL_S = 0.2                # while waiting for the server's answer: how often to look whether it is stopped
IDLE_S_DEFAULT = 300.0        # a server with no run exits after this long (CODIST_WARM_IDLE_S)
SUN_PATH_MAX = 108           # Linux's sockaddr_un.sun_path, its terminating NUL included


class WarmUnavailable(RuntimeError):
    """The warm server cannot be used safely or in time; the message is one line saying why."""


#: why this process gave up on the warm server: said once, later tries fail at once with it
unavailable: str | None = None


def runtime_dir() -> Path:
    """This user's folder for the servers' sockets, locks and logs (UntrustedPath if it is not private)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return private_dir(Path(base) / f"codist-warm-{os.getuid()}")


def stop_servers(runtime: Path, sig: int = signal.SIGTERM) -> None:
    """Signal every warm server whose lock file lies under `runtime` (an XDG_RUNTIME_DIR): a
    server writes its pid into its socket's .lock. For tests and benchmarks with a private one."""
    for lock in runtime.glob("codist-warm-*/*.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            try:
                os.kill(int(text), sig)
            except ProcessLookupError:
                pass


def connect(env: dict[str, str]) -> tuple[socket.socket, int]:
    """A connection to this key's server, starting one if none answers, and the server's pid;
    WarmUnavailable (remembered for this process) if it cannot be trusted or reached."""
    global unavailable
    if unavailable is not None:
        raise WarmUnavailable(unavailable)
    try:
        return _connect(env)
    except (WarmUnavailable, UntrustedPath) as e:
        unavailable = str(e)
        raise WarmUnavailable(unavailable) from None


def _connect(env: dict[str, str]) -> tuple[socket.socket, int]:
    path = runtime_dir() / f"{server_key(env)}.sock"
    if len(os.fsencode(path)) >= SUN_PATH_MAX:   # connect and bind would fail with "AF_UNIX path too long"
        raise WarmUnavailable(f"its socket's path {path} is {len(os.fsencode(path))} bytes, over the "
                              f"{SUN_PATH_MAX - 1} a Unix socket allows: set XDG_RUNTIME_DIR to a shorter folder")
    log = path.with_suffix(".log")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    server = None
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            pid, uid, _ = peer_credentials(sock)
            if uid != os.geteuid():   # before anything is sent: the request carries the environment
                sock.close()
                raise WarmUnavailable(f"{path} is served by uid {uid} (pid {pid}), not by this user")
            return sock, pid
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
        if server is None:
            idle_s = env.get("CODIST_WARM_IDLE_S", str(IDLE_S_DEFAULT))
            out = open_private(log, os.O_WRONLY | os.O_APPEND)
            try:
                server = subprocess.Popen(
                    [sys.executable, "-m", "codist.launching.warm_server", "--socket", str(path), "--idle_s", idle_s],
                    env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
            finally:
                os.close(out)
        elif server.poll() not in (None, 0):   # 0: another server holds the lock and is starting
            raise WarmUnavailable(f"the warm server exited with code {server.returncode}; see {log}")
        if time.monotonic() > deadline:
            raise WarmUnavailable(f"no warm server answered on {path} within {CONNECT_TIMEOUT_S:.0f} s; see {log}")
        time.sleep(0.02)


class WarmRun:
    """The fork launcher's arguments `argv` run by the warm server for the ranks' environment
    `env` (its import-time part picks the server), with the calls the supervisor makes on a Popen:
    `pid` (the run's supervisor, leader of the run's own session: a killpg reaches its ranks),
    `wait`, `send_signal`, `returncode`."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.returncode: int | None = None
        self.sock, self.server_pid = connect(env)
        send_message(self.sock, {"argv": argv, "env": env, "cwd": os.getcwd()})
        self.reader = MessageReader(self.sock)
        reply = self._answer()
        if reply is not None and "refused" in reply:
            self.sock.close()
            raise WarmUnavailable(f"the warm server refused the run: {reply['refused']}")
        if reply is None or "pid" not in reply:
            self.sock.close()
            raise RuntimeError("the warm server closed the connection before starting the run")
        self.pid = reply["pid"]
        seen = proc_stat(self.pid)
        if seen is None or seen[1] != self.server_pid or seen[3] != self.pid:
            self.sock.close()   # the supervisor sees its client gone and stops the run
            raise RuntimeError(f"the warm server named pid {self.pid}, which is not its own run (a child of "
                               f"pid {self.server_pid} leading its session); not waiting for it")
        self.started = seen[4]
        send_message(self.sock, {"output": True}, fds=[sys.stdout.fileno(), sys.stderr.fileno()])

    def _answer(self) -> dict | None:
        """The server's first answer; WarmUnavailable if the server is stopped (SIGSTOP) meanwhile
        (what it queued starts nothing: the supervisor finds this connection closed)."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not select.select([self.sock], [], [], POLL_S)[0]:
            state = proc_stat(self.server_pid)
            if state is not None and state[0] in "Tt":
                self.sock.close()
                raise WarmUnavailable(f"the warm server (pid {self.server_pid}) is stopped; not waiting for it")
            if time.monotonic() > deadline:
                self.sock.close()
                raise WarmUnavailable(f"the warm server (pid {self.server_pid}) did not answer within "
                                      f"{CONNECT_TIMEOUT_S:.0f} s")
        return self.reader.read()

    def ours(self) -> bool:
        """The run's supervisor is still the process that started this run (not a reused pid)."""
        seen = proc_stat(self.pid)
        return seen is not None and seen[3] == self.pid and seen[4] == self.started

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if not self.reader.buf:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(["codist.warm_server", str(self.pid)], timeout)
        reply = self.reader.read()
        # no exit code: the supervisor died with the server; the run's own session is still ours to end
        self.returncode = reply["rc"] if reply and "rc" in reply else self._orphaned()
        self.sock.close()
        return self.returncode

    def _orphaned(self) -> int:
        print(f"codist: the warm server ended before run {self.pid} did; stopping it", file=sys.stderr)
        if self.ours():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return 1

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self.ours():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
