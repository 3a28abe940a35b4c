"""The warm server's trust boundary (issue 26), replayed as the probes did it: another local user
(made with useradd; these tests need root and skip otherwise) pre-creates the server's folder
with a fake server, or connects to the real one; a fake server of this user names a pid that is
not its run; a stopped server; an idle connection; an edited plugin module. Nothing of the
victim's may reach another user (its environment, its output), no process the server names is
signalled unless it is the server's own run, and the victim's run falls back to the fork launcher
with one line, or is refused with one."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TINY

from codist.launching import warm_client, warm_server
from codist.launching.launch import EXTENSIONS, extensions_dir
from codist.rank_env import rank_env
from codist.launching.warm_client import WarmRun, WarmUnavailable, server_key
from codist.launching.warm_server import send_message
from codist.owner import UntrustedPath, open_private, private_dir, proc_stat

PROBE_USER = "codist-probe"
SECRET = "s3cret-token-of-the-victim"


@pytest.fixture(scope="module")
def other_user() -> pwd.struct_passwd:
    """A second local user (created once; CI runs the suite as root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the probes create a second user with useradd and act as it")
    try:
        return pwd.getpwnam(PROBE_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
                       check=True, capture_output=True)
        return pwd.getpwnam(PROBE_USER)


@pytest.fixture(autouse=True)
def fresh_verdict(monkeypatch):
    monkeypatch.setattr(warm_client, "unavailable", None)   # each test's client decides afresh


@pytest.fixture
def shared_tmp():
    """A folder like /tmp (sticky, everyone may create in it) outside pytest's private one."""
    base = Path(tempfile.mkdtemp(prefix="codist-probe-", dir="/tmp"))
    base.chmod(0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def as_user(user: pwd.struct_passwd, code: str, **kw) -> subprocess.Popen:
    """`python3 -c code` as `user` (the system's interpreter: the venv's may lie in root's home; the
    code imports only codist's stdlib-only warm modules)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), "HOME": "/"}
    return subprocess.Popen(["/usr/bin/python3", "-c", code], user=user.pw_uid, group=user.pw_gid,
                            extra_groups=[], env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def victim_run(tmp_path: Path, runtime: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "VICTIM_SECRET": SECRET, **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_folder_must_be_this_users_own_and_private(tmp_path):
    made = private_dir(tmp_path / "new")
    assert made.is_dir() and made.stat().st_mode & 0o777 == 0o700
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    (tmp_path / "file").write_text("")
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    for name, why in (("open", "has mode 0777"), ("file", "is not a directory"), ("link", "is a symbolic link")):
        with pytest.raises(UntrustedPath, match=why):
            private_dir(tmp_path / name)
    if os.geteuid() == 0:
        (tmp_path / "theirs").mkdir(mode=0o700)
        os.chown(tmp_path / "theirs", 12345, 12345)
        with pytest.raises(UntrustedPath, match="belongs to uid 12345"):
            private_dir(tmp_path / "theirs")
    # a link planted where the server's log or lock goes is never followed (a private file kept whole)
    secret = tmp_path / "private"
    secret.write_text("keep")
    (made / "x.log").symlink_to(secret)
    with pytest.raises(OSError):
        open_private(made / "x.log", os.O_WRONLY | os.O_TRUNC)
    assert secret.read_text() == "keep"


def test_another_users_folder_and_fake_server_get_nothing(tmp_path, other_user, shared_tmp):
    """The probe: another user pre-creates codist-warm-<uid> (mode 0777) in the shared temp folder
    with a fake server on the victim's socket. The victim's run must not connect: it says why once
    and trains with the fork launcher; the fake server receives nothing."""
    base = shared_tmp
    folder = base / f"codist-warm-{os.getuid()}"
    key = server_key(rank_env({**os.environ, "XDG_RUNTIME_DIR": str(base)}, 1, "cpu"))
    fake = as_user(other_user, f"""
import os, socket, sys
folder = {str(folder)!r}
os.mkdir(folder); os.chmod(folder, 0o777)
s = socket.socket(socket.AF_UNIX); s.bind(os.path.join(folder, {key + '.sock'!r})); os.chmod(s.getsockname(), 0o777)
s.listen(8); s.settimeout(240); print("listening", flush=True)
got = b""
try:
    while True:
        c, _ = s.accept(); c.settimeout(5)
        try:
            while (chunk := c.recv(65536)):
                got += chunk
        except OSError:
            pass
        print("RECEIVED", len(got), got.decode(errors="replace"), flush=True)
except OSError:
    pass
""")
    try:
        assert fake.stdout.readline().strip() == "listening", fake.stderr.read()
        result = victim_run(tmp_path, base)
    finally:
        fake.send_signal(signal.SIGKILL)
        out, _ = fake.communicate()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RECEIVED" not in out and SECRET not in out
    notes = [line for line in result.stderr.splitlines() if "warm server not used" in line]
    assert len(notes) == 1 and f"{folder} belongs to uid {other_user.pw_uid}" in notes[0], result.stderr[-2000:]
    assert (tmp_path / "out" / "summary.json").exists()


def light_server(folder: Path) -> tuple[subprocess.Popen, Path]:
    """A real warm server whose imports are skipped (the checks under test come before any run)."""
    private_dir(folder)
    sock = folder / "0123456789abcdef.sock"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from codist.launching import fork, warm_server; "
                             "fork.preload = lambda workload=None: None; sys.exit(warm_server.main(sys.argv[1:]))",
                             "--socket", str(sock), "--idle_s", "60"],
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stderr=subprocess.PIPE, text=True)
    assert "listening" in proc.stderr.readline()
    return proc, sock


def request_over(sock_path: Path, request: dict) -> dict | None:
    from codist.launching.warm_server import MessageReader
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock_path))
        send_message(s, request)
        s.settimeout(30)
        return MessageReader(s).read()


def test_the_server_serves_its_own_user_only_and_checks_every_request(tmp_path, other_user, shared_tmp):
    """The umask-000 probe: another user who can reach the socket gets no run (SO_PEERCRED), and a
    request of this user that is not the fork launcher's, or whose environment is another key's, starts nothing."""
    base = shared_tmp
    server, sock = light_server(base / "srv")
    try:
        (base / "srv").chmod(0o711)   # as if the folder were reachable: the credentials still refuse
        sock.chmod(0o666)
        attacker = as_user(other_user, f"""
import socket, sys
sys.path.insert(0, {str(ROOT / 'src')!r})
from codist.launching.warm_server import send_message
s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r}); s.settimeout(20)
try:
    send_message(s, {{"argv": ["--nprocs", "1", "--master_port", "29999", "--", "--config", "/x", "--out",
                               "/tmp/pwned"], "env": {{}}, "cwd": "/"}}, fds=[1, 2])
    print("ANSWER", repr(s.recv(65536)), flush=True)
except (BrokenPipeError, ConnectionResetError):
    print("ANSWER b''", flush=True)   # closed before the request was sent
""")
        out, err = attacker.communicate(timeout=60)
        assert "ANSWER b''" in out, out + err   # closed without a word
        (base / "srv").chmod(0o700)
        for other in ({"cli": ["check", "x.yaml"], "env": {}, "cwd": "/"},
                      {"run": {"config": "x.yaml", "overrides": []}, "env": {}, "cwd": "/", "pid": os.getpid()}):
            assert request_over(sock, other)["refused"].startswith(
                "a request carries the fork launcher's 'argv', 'env' and 'cwd'")
        assert "does not match this server's key" in request_over(
            sock, {"argv": ["--nprocs", "1", "--master_port", "1", "--"], "env": {}, "cwd": "/"})["refused"]
    finally:
        server.send_signal(signal.SIGKILL)
        log = server.communicate()[1]
    assert f"refused a connection from pid {attacker.pid}, uid {other_user.pw_uid}" in log
    assert not Path("/tmp/pwned").exists()


def test_a_server_of_another_user_gets_no_request(tmp_path, other_user, shared_tmp):
    """The victim (a user) finds, in its own folder, a socket another user listens on (here root):
    the client checks the listener's credentials before sending its environment and output."""
    base = shared_tmp
    folder = base / f"codist-warm-{other_user.pw_uid}"
    folder.mkdir(mode=0o700)
    os.chown(folder, other_user.pw_uid, other_user.pw_gid)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), "HOME": "/", "XDG_RUNTIME_DIR": str(base)}
    victim = as_user(other_user, f"""
import os
from codist.launching.warm_client import WarmRun, WarmUnavailable, server_key
env = {env!r}
os.environ.update(env)
print(server_key(env), flush=True)
input()
try:
    WarmRun([], {{**env, "VICTIM_SECRET": {SECRET!r}}})
except WarmUnavailable as e:
    print("REFUSED", e)
""")
    sock = folder / f"{victim.stdout.readline().strip()}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    os.chmod(sock, 0o666)
    listener.listen(1)
    listener.settimeout(60)
    received = []

    def serve():
        conn, _ = listener.accept()
        conn.settimeout(10)
        received.append(conn.recv(65536))
    thread = threading.Thread(target=serve)
    thread.start()
    out, err = victim.communicate("go\n", timeout=60)
    thread.join(30)
    listener.close()
    assert "REFUSED" in out and "is served by uid 0" in out, out + err
    assert received == [b""]   # connected, checked, closed: nothing sent


class FakeServer:
    """A server of this user that answers a pid of its choosing (and an exit code)."""

    def __init__(self, reply: list[dict]):
        self.path = warm_client.runtime_dir() / f"{server_key(dict(os.environ))}.sock"
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        self.listener.listen(1)
        self.thread = threading.Thread(target=self.serve, args=(reply,))
        self.thread.start()

    def serve(self, reply):
        conn, _ = self.listener.accept()
        conn.recv(65536)
        for message in reply:
            send_message(conn, message)
        time.sleep(0.5)
        conn.close()

    def close(self):
        self.thread.join(10)
        self.listener.close()
        self.path.unlink()


def test_a_pid_the_server_names_is_signalled_only_if_it_is_the_servers_run(warm_dir):
    """The probes: a fake server answers the pid of an unrelated process group of this user (the
    client used to SIGKILL that group), or an exit code 0 for a run it never started."""
    # a session of this user's that is not the (fake) server's child
    bystander = int(subprocess.run(["sh", "-c", "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!"],
                                   capture_output=True, text=True, check=True).stdout)
    try:
        for reply in ([{"pid": bystander}], [{"pid": bystander}, {"rc": 0}]):
            fake = FakeServer(reply)
            try:
                with pytest.raises(RuntimeError, match=f"named pid {bystander}, which is not its own run"):
                    WarmRun([], dict(os.environ))
            finally:
                fake.close()
        assert proc_stat(bystander)[0] in "SR"   # alive, never signalled
    finally:
        os.kill(bystander, signal.SIGKILL)


def session_server(tmp_path) -> tuple[int, Path]:
    """The session's warm server for TINY's `codist run` (started by a first run), its pid and log."""
    assert victim_run(tmp_path / "first", os.environ["XDG_RUNTIME_DIR"]).returncode == 0
    env = rank_env(dict(os.environ), 1, "cpu")
    env[EXTENSIONS] = str(extensions_dir(env)[0])   # as launch_env gives the ranks (part of the server's key)
    sock = warm_client.runtime_dir() / f"{server_key(env)}.sock"
    return int(Path(f"{sock}.lock").read_text()), sock.with_suffix(".log")


def test_a_stopped_server_is_noticed_and_its_queued_run_never_starts(tmp_path):
    (tmp_path / "first").mkdir()
    pid, log = session_server(tmp_path)
    os.kill(pid, signal.SIGSTOP)
    try:
        result = victim_run(tmp_path, os.environ["XDG_RUNTIME_DIR"])
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.returncode == 0, result.stderr[-3000:]
    notes = [line for line in result.stderr.splitlines() if "warm server not used" in line]
    assert len(notes) == 1 and f"the warm server (pid {pid}) is stopped" in notes[0], result.stderr[-2000:]
    deadline = time.monotonic() + 60   # the server, resumed, reads the queued request of a client gone
    while "the client has gone; nothing started" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "the client has gone; nothing started" in log.read_text()
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["launcher"] in ("warm", "fork")


def test_a_runtime_folder_too_deep_for_a_unix_socket_gives_the_ordinary_path(tmp_path):
    """A socket's path is at most 107 bytes (sun_path): a deep XDG_RUNTIME_DIR used to end the run
    with "cannot start the run: AF_UNIX path too long"; now the run starts without the server."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    result = victim_run(tmp_path, deep)
    assert result.returncode == 0, result.stderr[-3000:]
    notes = [line for line in result.stderr.splitlines() if "warm server not used" in line]
    assert len(notes) == 1 and "over the 107 a Unix socket allows" in notes[0], result.stderr[-2000:]
    assert not list(deep.rglob("*.sock"))
    assert (tmp_path / "out" / "summary.json").exists()


def test_an_idle_connection_delays_no_run(tmp_path):
    """One client connects and sends nothing; another's run starts and ends meanwhile (the server
    used to read each request in its main loop, waiting up to REQUEST_TIMEOUT_S for the idle one)."""
    (tmp_path / "first").mkdir()
    _, log = session_server(tmp_path)
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(str(log.with_suffix(".sock")))
    idle.sendall(b"\0\0")   # half a header
    try:
        result = victim_run(tmp_path, os.environ["XDG_RUNTIME_DIR"])
        assert result.returncode == 0 and "warm server not used" not in result.stderr, result.stderr[-2000:]
        with pytest.raises(BlockingIOError):   # still open: nobody waited for it to finish or time out
            idle.recv(1, socket.MSG_DONTWAIT)
    finally:
        idle.close()


def test_an_edited_plugin_module_gets_a_new_server(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text("X = 1\n")
    env = {"CODIST_PLUGINS": "my_plugin", "PYTHONPATH": str(tmp_path)}
    key = server_key(env)
    stat = plugin.stat()
    os.utime(plugin, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert server_key(env) != key
    assert warm_server.plugin_files(env) == [str(plugin)]


def test_a_server_killed_mid_run_leaves_the_run_and_its_exit_code(tmp_path):
    """kill -9 of the server while a run trains: the supervisor (its own session) finishes the run and
    answers the exit code itself; the client exits 0 (it used to exit 1 and SIGKILL the run's group)."""
    (tmp_path / "first").mkdir()
    pid, _ = session_server(tmp_path)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "steps": 300, "eval_every": 100}}))
    out = tmp_path / "long"
    client = subprocess.Popen([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / ".ranks" / "rank-0.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (out / "summary.json").exists()   # mid-run: 300 updates take seconds
    os.kill(pid, signal.SIGKILL)
    err = client.communicate(timeout=300)[1]
    assert client.returncode == 0, err[-3000:]
    assert "ended before run" not in err and (out / "summary.json").exists()
