"""A pytest fork server for benchmarks/mutation.py, so that a mutant costs its tests, not the
~4 s of CPU that importing numpy, pandas, scipy and torch takes on every start.

    python benchmarks/mutation_server.py serve SOCKET TREE LOG CHECKOUT MODULE...   # imports MODULE..., listens
    python benchmarks/mutation_server.py client SOCKET -- PYTEST_ARGS  # cosmic-ray's test command

The server imports only third-party modules (never the project's: the module under mutation is
imported afresh from the file cosmic-ray has just written, in a child forked for each request).
Each child starts a session of its own (os.setsid) and runs pytest.main in TREE; its exit status
is the client's. When the client goes away first (cosmic-ray's per-mutant timeout kills the
client's process group), the child's whole process group is killed, so no mutant outlives its
timeout. Bytecode is never written (a mutant the same size as the original, written within the
same second, would otherwise be read from a stale .pyc).
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path


def leaks(tree: str, checkout: str) -> list[str]:
    """The checkout's own source files (not the copy's) that this process imported."""
    own = tuple(os.path.join(checkout, d) + os.sep for d in ("src", "analysis", "workflows", "benchmarks", "tests"))
    return sorted(f for m in list(sys.modules.values())
                  if (f := getattr(m, "__file__", None) or "").startswith(own) and f != os.path.abspath(__file__))


def serve(path: str, tree: str, preload: list[str], log: str, checkout: str) -> None:
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.chdir(tree)
    for name in preload:
        importlib.import_module(name)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        args = json.loads(conn.makefile().readline())
        pid = os.fork()
        if pid == 0:
            srv.close()
            conn.close()
            os.setsid()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            import pytest
            code = 1
            try:
                code = int(pytest.main(args))
                leaked = leaks(tree, checkout)
                if leaked:
                    print(f"mutation_server: imported from the checkout, not the copy: {leaked}")
                    code = 99
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status = None
        while status is None:
            ready, _, _ = select.select([conn], [], [], 0.1)
            if ready and not conn.recv(1):   # the client is gone: its timeout
                os.killpg(pid, signal.SIGKILL)
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
        try:
            conn.sendall(f"{status}\n".encode())
        except OSError:
            pass
        conn.close()


def client(path: str, args: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall((json.dumps(args) + "\n").encode())
    reply = conn.makefile().readline().strip()
    return int(reply) if reply.lstrip("-").isdigit() else 1


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[6:], sys.argv[4], sys.argv[5])
    else:
        code = client(sys.argv[2], sys.argv[4:])
        sys.exit(code if 0 <= code < 256 else 1)
