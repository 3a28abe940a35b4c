"""A throw-away single-node SLURM cluster on this machine, for `make test-slurm`.

    python tests/slurm/cluster.py run -- CMD ...   start it, run CMD with SLURM_CONF set, stop it

Installs Debian's slurm-wlm and munge with apt when slurmctld is missing (root only). Config,
state, spool, pid and log files live under a fresh temp dir; the controller and the node
listen on loopback ports chosen free; munged runs with its own socket, key copy and pid file
there too; slurm.conf is linked at /etc/slurm/slurm.conf while it runs (refused if one
exists). The daemons (munged, slurmctld, slurmd) are stopped by their pid files when CMD
ends, also when it fails or this script gets SIGTERM/SIGINT. Exit code: CMD's, or 2 with one
line saying what failed to start.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ["slurm-wlm", "munge"]
# snakemake-executor-plugin-slurm's job step drops SLURM_CONF (with every SLURM_* variable but
# the job id), so srun inside a job finds the config at SLURM's default path, as on a real
# cluster: the cluster's slurm.conf is linked there while it runs (and only if none exists)
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")


def say(msg: str) -> None:
    print(f"test-slurm: {msg}", file=sys.stderr, flush=True)


class StartError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_installed() -> None:
    if shutil.which("slurmctld") and shutil.which("munged"):
        return
    if os.geteuid() != 0:
        raise StartError("slurmctld/munged missing and not root: apt-get install slurm-wlm munge first")
    say("installing slurm-wlm and munge with apt (about a minute)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode:
            raise StartError(f"{' '.join(cmd)} failed: {out.stderr.strip().splitlines()[-1:]}")


def mem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return max(1000, int(line.split()[1]) // 1024 // 2)
    return 4000


SLURM_CONF = """\
ClusterName=codisttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket.2
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
# fast turnaround for tests: SIGKILL 5 s after SIGTERM, finished jobs shown by squeue for 300 s (the plugin reads their state there)
KillWait=5
MinJobAge=300
InactiveLimit=0
JobRequeue=1
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="codist-slurm-"))
        self.conf = self.root / "slurm.conf"
        self.linked = False
        self.pidfiles = {"slurmd": self.root / "slurmd.pid", "slurmctld": self.root / "slurmctld.pid",
                         "munged": self.root / "munge" / "munged.pid"}

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        ensure_installed()
        for sub in ("state", "spool", "log", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        key = munge / "munge.key"
        if Path("/etc/munge/munge.key").exists():
            shutil.copy("/etc/munge/munge.key", key)
        else:
            key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        munge.chmod(0o700)
        self._daemon("munged", ["munged", "--force", f"--socket={munge}/munge.socket.2", f"--key-file={key}",
                                f"--pid-file={self.pidfiles['munged']}", f"--log-file={munge}/munged.log",
                                f"--seed-file={munge}/munged.seed"])
        if DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink():
            raise StartError(f"{DEFAULT_CONF} exists: this machine has a SLURM of its own; "
                             f"run the slurm tests against it (SLURM_CONF=... pytest -m slurm) instead")
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(SLURM_CONF.format(host=host, root=self.root, ctld_port=free_port(),
                                               slurmd_port=free_port(), cpus=os.cpu_count() or 1, mem=mem_mb()))
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(self.conf)
        self.linked = True
        self._daemon("slurmctld", ["slurmctld", "-f", str(self.conf)])
        self._daemon("slurmd", ["slurmd", "-f", str(self.conf)])
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env(), capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc"):
                say(f"cluster up: {self.conf} (node {host}, {os.cpu_count()} CPUs)")
                return
            time.sleep(0.5)
        raise StartError(f"the node did not come up in 60 s (sinfo: {out.stdout.strip() or out.stderr.strip()}); "
                         f"logs: {self.root}/log")

    def _daemon(self, name: str, cmd: list[str]) -> None:
        out = subprocess.run(cmd, env=self.env(), capture_output=True, text=True)
        pidfile = self.pidfiles[name]
        deadline = time.time() + 15
        while not pidfile.exists() and time.time() < deadline:
            time.sleep(0.1)
        if out.returncode or not pidfile.exists():
            raise StartError(f"{name} did not start (exit {out.returncode}): "
                             f"{(out.stderr or out.stdout).strip()[-300:]}; logs: {self.root}/log")

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            pidfile = self.pidfiles[name]
            try:
                pid = int(pidfile.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.time() + 10
            while time.time() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
        if self.linked and DEFAULT_CONF.is_symlink() and os.readlink(DEFAULT_CONF) == str(self.conf):
            DEFAULT_CONF.unlink()
        if os.environ.get("CODIST_KEEP_SLURM_DIR"):
            say(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "run" or argv[1] != "--" or len(argv) < 3:
        print("usage: cluster.py run -- CMD ...", file=sys.stderr)
        return 2
    cluster = Cluster()

    def stop_on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop_on_signal)
    try:
        try:
            cluster.start()
        except StartError as e:
            say(f"cannot start the cluster: {e}")
            return 2
        child = subprocess.Popen(argv[2:], env=cluster.env())
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
    except KeyboardInterrupt:
        say("interrupted; stopping the cluster")
        return 130
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
