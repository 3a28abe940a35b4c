"""Two nodes for real: jobs across the two slurmd nodes of `make test-slurm`'s cluster, each node
in a network and UTS namespace of its own (tests/slurm/cluster.py: hosts codist-n1 and
codist-n2 on a bridge, 10.250.0.0/24). A job asks for two nodes and two ranks per node
(launch.gpus_per_node=2: codist.launching.cluster.job_resources' multi-node geometry, as on GPUs; one rank
per node is not possible: snakemake-executor-plugin-slurm refuses an `mpi` job whose
tasks_per_node is 1);
`codist run` in its batch script starts the ranks with one srun, each rank takes MASTER_ADDR
from the step's first host (`scontrol show hostnames`) and rendezvous across the bridge.
Rows are compared with the same run trained on one machine (the fork launcher: one import of
torch for the 4 ranks; its rows equal torchrun's, tests/test_fork_launcher.py). Skipped unless the
cluster is that one (its node names and addresses are what the MASTER_ADDR test checks).
"""
from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, deep_update, launch_run, read_rows
from test_slurm import (RUN, cluster_up, comparable, job_state, preempt_and_resubmit, sbatch_options, slurm,
                        srun_steps, submit, wait_job)

from codist.rank_env import hostnames, job_port

_spec = importlib.util.spec_from_file_location("test_slurm_cluster", ROOT / "tests" / "slurm" / "cluster.py")
slurm_cluster = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slurm_cluster)
NODE_ADDR = dict(slurm_cluster.NODES)   # host name -> its namespace's address


def two_node_cluster() -> bool:
    if not cluster_up():
        return False
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=10)
    return sorted(out.stdout.split()) == sorted(NODE_ADDR)


pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not two_node_cluster(),
                                 reason="no two-node test cluster (make test-slurm starts one)")]

# 4 ranks, two per node (srun's block distribution: ranks 0-1 on the first node, 2-3 on the
# second); the one-machine reference runs the 4 ranks on this machine's 2 cores (oversubscribe)
FOUR = {"parallel": {"world_size": 4}, "launch": {"gpus_per_node": 2, "oversubscribe": True}}
# codistillation: one model group per node (its all-reduce stays on the node; the exchange crosses);
# 100 updates (the preemption test stops it after its checkpoint at 20..30)
CODIST = deep_update(RUN, {**FOUR, "train": {"steps": 100}})
# all-reduce: one model group across both nodes (every update's gradient crosses the bridge)
ALLREDUCE = {**deep_update(CODIST, {"parallel": {"models": 1}, "train": {"steps": 60}}),
             "algorithm": {"name": "allreduce"}}


def one_machine(out: Path, cfg: dict) -> Path:
    """`cfg` trained on this machine without SLURM (the run id leaves out the launch section)."""
    return launch_run(out, deep_update(cfg, {"launch": {"launcher": "fork"}}), base={})


@pytest.fixture(scope="module")
def codist_reference(tmp_path_factory):
    """The codistillation run trained on this machine (one node) without SLURM."""
    return one_machine(tmp_path_factory.mktemp("ref") / "run", CODIST)


# ---------------------------------------------------------------- what the ranks' processes show

def rank_pids(out: Path, job: str, timeout: float = 120) -> dict[int, int]:
    """Rank -> pid, from the ranks' heartbeats (RUN/.ranks/rank-<r>.json), once all 4 exist."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = {}
        for r in range(4):
            try:
                pids[r] = json.loads((out / ".ranks" / f"rank-{r}.json").read_text())["pid"]
            except (OSError, ValueError, KeyError):
                pass
        if len(pids) == 4:
            return pids
        assert job_state(job)[0] in ("PENDING", "RUNNING", "CONFIGURING"), f"job {job} ended before its ranks wrote"
        time.sleep(0.05)
    raise AssertionError("the ranks wrote no heartbeat in time")


def host_of(pid: int) -> str:
    """The host name of a process's UTS namespace."""
    return subprocess.run(["nsenter", "-t", str(pid), "--uts", "hostname"], capture_output=True, text=True,
                          check=True).stdout.strip()


def established_peers(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every established TCP connection in a process's network namespace
    (/proc/<pid>/net/tcp and tcp6; IPv4-mapped IPv6 addresses as IPv4)."""
    peers = set()
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "01":   # TCP_ESTABLISHED
                continue
            addr_hex, port_hex = fields[2].split(":")
            raw = bytes.fromhex(addr_hex)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))   # per 32-bit word: host order
            addr = ipaddress.ip_address(raw)
            if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
                addr = addr.ipv4_mapped
            peers.add((str(addr), int(port_hex, 16)))
    return peers


def net_ns(pid: int) -> int:
    return Path(f"/proc/{pid}/ns/net").stat().st_ino


# ---------------------------------------------------------------- the tests

def test_allreduce_across_two_nodes_rendezvous_at_the_first_node_and_equals_one_node(tmp_path):
    """One model group over both nodes: ranks 0-1 on the step's first host, 2-3 on the other,
    each in its node's namespaces; rank 2 reached MASTER_ADDR:MASTER_PORT at the first node's
    namespace address (not a loopback address); the rows equal the same run on one machine."""
    assert sbatch_options(ALLREDUCE)[-3:] == ["--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=1"]
    out, log = tmp_path / "run", tmp_path / "job.log"
    job = submit(tmp_path, ALLREDUCE, out, log)
    pids = rank_pids(out, job)
    nodelist = slurm("squeue", "-h", "-j", job, "-o", "%N").strip()
    hosts = hostnames(nodelist)
    assert sorted(hosts) == sorted(NODE_ADDR), nodelist
    master_addr = ipaddress.ip_address(NODE_ADDR[hosts[0]])
    # the ranks' host names and network namespaces: two ranks per node (srun's block distribution)
    assert [host_of(pids[r]) for r in range(4)] == [hosts[0], hosts[0], hosts[1], hosts[1]]
    assert net_ns(pids[0]) == net_ns(pids[1]) and net_ns(pids[2]) == net_ns(pids[3])
    assert len({net_ns(pids[0]), net_ns(pids[2]), net_ns(os.getpid())}) == 3   # nor the controller's (this test's)
    # the rendezvous (the TCPStore at MASTER_ADDR:MASTER_PORT, held for the whole run) goes to the
    # first node's namespace address from both nodes' namespaces: every connection to the store's
    # port, the first node's own ranks' included, has that address, none a loopback one
    # (/proc/<pid>/net/tcp lists the whole namespace); MASTER_ADDR resolves there in rank 2's namespace
    master = (str(master_addr), job_port(job))

    def to_store(pid):
        return {p for p in established_peers(pid) if p[1] == master[1]}
    deadline = time.time() + 60
    while not all(to_store(pids[r]) for r in (0, 2)) and time.time() < deadline:
        assert job_state(job)[0] == "RUNNING", f"job {job} ended before the ranks connected: {log.read_text()[-3000:]}"
        time.sleep(0.1)
    assert to_store(pids[0]) == to_store(pids[2]) == {master}, (to_store(pids[0]), to_store(pids[2]))
    assert not master_addr.is_loopback
    resolved = subprocess.run(["nsenter", "-t", str(pids[2]), "--net", "--mount", "getent", "ahostsv4", hosts[0]],
                              capture_output=True, text=True).stdout.split()
    assert resolved and resolved[0] == str(master_addr), resolved
    assert wait_job(job) == ("COMPLETED", "0:0"), log.read_text()[-3000:]
    assert srun_steps(job) == ["0", "0"]   # one srun step, a task on each node
    reference = one_machine(tmp_path / "ref", ALLREDUCE)
    assert comparable(read_rows(out)) == comparable(read_rows(reference))


def test_codistillation_with_one_model_group_per_node_equals_one_node(codist_reference, tmp_path):
    out, log = tmp_path / "run", tmp_path / "job.log"
    job = submit(tmp_path, CODIST, out, log)
    assert wait_job(job) == ("COMPLETED", "0:0"), log.read_text()[-3000:]
    assert srun_steps(job) == ["0", "0"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["world_size"] == 4 and manifest["models"] == 2 and manifest["hardware"]["hostname"] in NODE_ADDR
    assert comparable(read_rows(out)) == comparable(read_rows(codist_reference))
    assert json.loads((out / "summary.json").read_text())["final_metric"] == \
        json.loads((codist_reference / "summary.json").read_text())["final_metric"]


def test_preempted_two_node_job_checkpoints_and_resumes_to_the_same_rows(codist_reference, tmp_path):
    """SIGTERM to the batch script (on the first node) reaches both nodes' ranks as SIGUSR1
    through srun; they agree to stop, checkpoint, exit 3; the resubmitted job resumes there."""
    out = tmp_path / "run"
    job, job2 = preempt_and_resubmit(tmp_path, CODIST, out)
    assert srun_steps(job) == srun_steps(job2) == ["0", "0"]   # both jobs' ranks on both nodes
    assert comparable(read_rows(out)) == comparable(read_rows(codist_reference))
