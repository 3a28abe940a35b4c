"""`codist run`'s side of `launch.launcher: warm`: find (or start) the warm server for this
code and environment, hand it one run, and wait for it like a subprocess.

The socket is keyed by everything the server's imports depend on: the interpreter, the codist
sources (path, size, mtime: an edited file gets a new server, never stale code) and the
environment read at import time (threads, accelerator, paths). Runs with the same key share
one server; a stale one idles out (codist.warm_server).
"""
from __future__ import annotations

import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .warm_server import MessageReader, send_message

# environment variables read while torch, numpy (OpenBLAS) and DeepSpeed import
# (and CODIST_PLUGINS: the server imports those modules with codist.config)
IMPORT_ENV_PREFIXES = ("OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH", "DS_", "CUDA", "PYTHON", "LD_", "NCCL_",
                       "CODIST_PLUGINS")
CONNECT_TIMEOUT_S = 120.0   # a new server listens within a second; the budget is for a loaded machine
IDLE_S_DEFAULT = 300.0        # a server with no run exits after this long (CODIST_WARM_IDLE_S)


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"codist-warm-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


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


def server_key(env: dict[str, str]) -> str:
    h = hashlib.sha256(sys.executable.encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for name in sorted(env):
        if name.startswith(IMPORT_ENV_PREFIXES):
            h.update(f"{name}={env[name]}\n".encode())
    return h.hexdigest()[:16]


def connect(env: dict[str, str]) -> socket.socket:
    """A connection to this key's server, starting one if none answers."""
    path = runtime_dir() / f"{server_key(env)}.sock"
    log = path.with_suffix(".log")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    server = None
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
        if server is None:
            idle_s = env.get("CODIST_WARM_IDLE_S", str(IDLE_S_DEFAULT))
            with log.open("ab") as out:
                server = subprocess.Popen(
                    [sys.executable, "-m", "codist.warm_server", "--socket", str(path), "--idle_s", idle_s],
                    env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        elif server.poll() not in (None, 0):   # 0: another server holds the lock and is starting
            raise RuntimeError(f"the warm server exited with code {server.returncode}; see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no warm server answered on {path} within {CONNECT_TIMEOUT_S:.0f} s; see {log}")
        time.sleep(0.02)


class WarmRun:
    """A run started by the warm server, with the calls `codist.launch.run` makes on a Popen:
    `pid` (the run's supervisor, leader of the run's own session: a killpg reaches its ranks),
    `wait`, `send_signal`, `returncode`."""

    def __init__(self, request: dict, key_env: dict[str, str]):
        """`request`: {"argv": the fork launcher's arguments, "env": the ranks' environment}, or
        {"cli": `codist run`'s arguments, "env", "config", "launched_unix"} (codist.warm_cli);
        `key_env`: the environment whose import-time part picks the server."""
        self.returncode: int | None = None
        self.sock = connect(key_env)
        send_message(self.sock, {**request, "cwd": os.getcwd()}, fds=[sys.stdout.fileno(), sys.stderr.fileno()])
        self.reader = MessageReader(self.sock)
        reply = self.reader.read()
        if reply is None or "pid" not in reply:
            raise RuntimeError("the warm server closed the connection before starting the run")
        self.pid = reply["pid"]

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if not self.reader.buf:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(["codist.warm_server", str(self.pid)], timeout)
        reply = self.reader.read()
        # no exit code: the server itself died; the run's own session is still ours to end
        self.returncode = reply["rc"] if reply and "rc" in reply else self._orphaned()
        self.sock.close()
        return self.returncode

    def _orphaned(self) -> int:
        print(f"codist: the warm server ended before run {self.pid} did; stopping it", file=sys.stderr)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return 1

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
