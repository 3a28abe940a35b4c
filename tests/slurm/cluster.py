"""A throw-away two-node SLURM cluster on this machine, for `make test-slurm`.

    python tests/slurm/cluster.py run -- CMD ...   start it, run CMD with SLURM_CONF set, stop it

Installs Debian's slurm-wlm and munge with apt when slurmctld is missing (root only). Each
daemon has a network namespace and a UTS namespace (host name) of its own, made here:

    codist<pid>-ctl  host codist-ctl  10.250.0.1   slurmctld, a bridge, and CMD itself
    codist<pid>-n1   host codist-n1   10.250.0.11  slurmd (node codist-n1)
    codist<pid>-n2   host codist-n2   10.250.0.12  slurmd (node codist-n2)

Each node's namespace holds one end of a veth pair whose other end is on the bridge in the
controller's namespace; the addresses exist only inside these namespaces (nothing is added to
this machine's own network). Every daemon also has a mount namespace of its own in which a
hosts file naming the three hosts is /etc/hosts (so a rank resolves MASTER_ADDR, a node name).
CMD runs in the controller's namespaces, so its sbatch/squeue reach slurmctld; a job's ranks on
two nodes rendezvous across the bridge. munged runs in this machine's namespaces with its
socket (a file, reachable from every namespace), key copy and pid file under a fresh temp dir,
as are SLURM's config, state, spool, pid and log files (log/slurmd-<node>.log) and the hosts
file; slurm.conf is linked at /etc/slurm/slurm.conf while it runs (refused if one exists). At
the end, also when CMD fails or this script gets SIGTERM/SIGINT: the daemons are stopped by
their pid files, any process left in the namespaces (a job's) by its pid, then the namespaces
(and with them the bridge and the veth pairs) are deleted. Exit code: CMD's, or 2 with one line
saying what failed to start.
"""
from __future__ import annotations

import os
import shutil
import signal
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
SUBNET = "10.250.0"   # private; exists only inside the namespaces made here
CTL = ("codist-ctl", f"{SUBNET}.1")
NODES = [("codist-n1", f"{SUBNET}.11"), ("codist-n2", f"{SUBNET}.12")]


def say(msg: str) -> None:
    print(f"test-slurm: {msg}", file=sys.stderr, flush=True)


class StartError(RuntimeError):
    pass


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
    """Memory each node offers: half of this machine's (the two nodes share it). From MemTotal,
    not MemAvailable: what other processes hold at start-up must not shrink the nodes below a
    job's request (--mem: 2000 MB per rank); no plugin enforces it (TaskPlugin=task/none)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return max(4000, int(line.split()[1]) // 1024 // 2)
    return 4000


SLURM_CONF = """\
ClusterName=codisttest
SlurmctldHost={ctl_host}({ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket.2
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
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
# SIGKILL 30 s after SIGTERM (SLURM's default KillWait: with 5 s, srun's own 7 s wait for a
# cancelled step outlasted it and codist run was killed before it said "preempted"); finished
# jobs shown by squeue for 300 s (the plugin reads their state there)
KillWait=30
MinJobAge=300
InactiveLimit=0
JobRequeue=1
# the nodes offer the CPUs written below even where the machine has fewer (see NODE_CPUS)
SlurmdParameters=config_overrides
{nodes}
PartitionName=test Nodes={node_names} Default=YES MaxTime=INFINITE State=UP
"""
# CPUs each node offers: the machine's, but at least 4, so that a 4-rank CPU run of the rehearsal
# subset (one task of one CPU per rank: codist.launching.cluster.job_resources) is schedulable on a 2-core
# machine; its ranks run oversubscribed there, as every rehearsal does (launch.oversubscribe). On
# such a machine the 4 also bound what runs at once: 4 ranks a node (under 9 GB of a rehearsal's)
NODE_CPUS = 4
NODE_LINE = "NodeName={name} NodeHostname={name} NodeAddr={addr} CPUs={cpus} RealMemory={mem} State=UNKNOWN"


def ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode:
        raise StartError(f"ip {' '.join(args)} failed: {out.stderr.strip()}")


class Cluster:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="codist-slurm-"))
        self.conf = self.root / "slurm.conf"
        self.linked = False
        self.prefix = f"codist{os.getpid()}"
        self.netns: list[str] = []      # made here, deleted at the end
        self.pidfiles = {**{f"slurmd {n}": self.root / f"slurmd-{n}.pid" for n, _ in NODES},
                         "slurmctld": self.root / "slurmctld.pid", "munged": self.root / "munge" / "munged.pid"}

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host.rsplit('-', 1)[1]}"

    def in_ns(self, host: str, cmd: list[str]) -> list[str]:
        """cmd in host's network namespace, a new UTS namespace named host, and a new mount
        namespace where the cluster's hosts file is /etc/hosts. (Not `ip netns exec`: it mounts a
        fresh /sys, without the cgroup file systems slurmd's cgroup plugin needs.)"""
        return ["nsenter", f"--net=/run/netns/{self.ns(host)}", "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c",
                f'mount --bind {self.root}/hosts /etc/hosts && hostname {host} && exec "$@"', "sh", *cmd]

    def start(self) -> None:
        ensure_installed()
        for sub in ("state", "log", "munge", *(f"spool/{n}" for n, _ in NODES)):
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
        self._network()
        cpus = max(os.cpu_count() or 1, NODE_CPUS)
        self.conf.write_text(SLURM_CONF.format(
            ctl_host=CTL[0], ctl_addr=CTL[1], root=self.root, node_names=",".join(n for n, _ in NODES),
            nodes="\n".join(NODE_LINE.format(name=n, addr=a, cpus=cpus, mem=mem_mb()) for n, a in NODES)))
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(self.conf)
        self.linked = True
        self._daemon("slurmctld", self.in_ns(CTL[0], ["slurmctld", "-f", str(self.conf)]))
        for name, _ in NODES:
            self._daemon(f"slurmd {name}", self.in_ns(name, ["slurmd", "-f", str(self.conf)]))
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run(self.in_ns(CTL[0], ["sinfo", "-h", "-N", "-o", "%t"]), env=self.env(),
                                 capture_output=True, text=True)
            states = out.stdout.split()
            if out.returncode == 0 and len(states) == len(NODES) and set(states) <= {"idle", "mix", "alloc"}:
                say(f"cluster up: {self.conf} (nodes {', '.join(n for n, _ in NODES)} in namespaces "
                    f"{self.prefix}-*, {cpus} CPUs each)")
                return
            time.sleep(0.5)
        raise StartError(f"the nodes did not come up in 60 s (sinfo: {out.stdout.strip() or out.stderr.strip()}); "
                         f"logs: {self.root}/log")

    def _network(self) -> None:
        """The namespaces, the bridge in the controller's, a veth pair per node, the hosts file."""
        hosts = "127.0.0.1 localhost\n::1 localhost\n" + "".join(f"{a} {n}\n" for n, a in [CTL, *NODES])
        (self.root / "hosts").write_text(hosts)
        for host, _ in [CTL, *NODES]:
            ns = self.ns(host)
            ip("netns", "add", ns)
            self.netns.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ctl = self.ns(CTL[0])
        ip("-n", ctl, "link", "add", "br0", "type", "bridge")
        ip("-n", ctl, "addr", "add", f"{CTL[1]}/24", "dev", "br0")
        ip("-n", ctl, "link", "set", "br0", "up")
        for host, addr in NODES:
            node, port = self.ns(host), f"v-{host}"
            ip("-n", ctl, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", node)
            ip("-n", ctl, "link", "set", port, "master", "br0", "up")
            ip("-n", node, "addr", "add", f"{addr}/24", "dev", "eth0")
            ip("-n", node, "link", "set", "eth0", "up")

    def command(self, cmd: list[str]) -> list[str]:
        """CMD as run in the controller's namespaces (its host name: codist-ctl)."""
        return self.in_ns(CTL[0], cmd)

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
        for name in [*(f"slurmd {n}" for n, _ in NODES), "slurmctld", "munged"]:
            try:
                pid = int(self.pidfiles[name].read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            terminate(pid)
        for ns in self.netns:   # what is left there was started by the daemons (a job's processes)
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in out.stdout.split():
                terminate(int(pid), grace=2)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if self.linked and DEFAULT_CONF.is_symlink() and os.readlink(DEFAULT_CONF) == str(self.conf):
            DEFAULT_CONF.unlink()
        if os.environ.get("CODIST_KEEP_SLURM_DIR"):
            say(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def terminate(pid: int, grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + grace
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


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
        child = subprocess.Popen(cluster.command(argv[2:]), env=cluster.env())
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
