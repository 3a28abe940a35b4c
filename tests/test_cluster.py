"""The cluster path without a scheduler: what Snakemake resolves from the profiles, the sbatch
lines snakemake-executor-plugin-slurm renders from a run's job resources (the plugin's own
code), the srun line of the ranks, host lists, and a rank's environment from SLURM's variables.
These show that commands are built right; tests/test_slurm.py runs them on a live scheduler."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from codist import config
from codist.launching.cluster import job_resources, srun_command
from codist.rank_env import expand_nodelist, hostnames, job_port, srun_env as rank_env
from codist.config import ConfigError
from codist.launching import launch
from codist.launching.launch import build_command, check_fits

PY = sys.executable
SNAKEMAKE = str(Path(PY).parent / "snakemake")


def gpu_cfg(world: int, **launch) -> config.RunConfig:
    return config.validate({"parallel": {"world_size": world},
                            "launch": {"device": "cuda", "gpus_per_node": 8, "cpus_per_rank": 6,
                                       "time_limit_min": 240, "mem_mb_per_rank": 12000, **launch}})


# ---------------------------------------------------------------- profiles

RESOLVE = """
import json, sys
from snakemake.cli import parse_args
_, a = parse_args(sys.argv[1:])
print(json.dumps({k: getattr(a, k) for k in ("cores", "jobs", "executor", "latency_wait", "keep_going",
    "rerun_incomplete", "retries", "printshellcmds", "show_failed_logs")}
    | {"default_resources": sorted(str(a.default_resources or {}).split("'")[1::2])}))
"""


def resolved(*args: str) -> dict:
    """What Snakemake's own command-line parser makes of `snakemake ARGS` in the repository."""
    out = subprocess.run([PY, "-c", RESOLVE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_plain_snakemake_uses_the_one_machine_settings():
    got = resolved()
    assert got["cores"] == __import__("os").cpu_count() and got["executor"] is None
    assert got["latency_wait"] == 5 and got["keep_going"] is False and got["rerun_incomplete"] is True
    assert got["show_failed_logs"] is True
    assert resolved("-c", "1")["cores"] == 1   # the command line still wins


def test_slurm_profile_gets_exactly_its_own_settings():
    got = resolved("--profile", "env/profiles/slurm")
    assert got["executor"] == "slurm" and got["jobs"] == 64 and got["cores"] == 1024
    assert got["latency_wait"] == 120 and got["keep_going"] is True and got["retries"] == 2
    assert got["show_failed_logs"] is False   # the workflow profile's one-machine keys stayed out
    assert {"slurm_partition", "runtime", "mem_mb", "cpus_per_task"} <= set(got["default_resources"])
    # the same with --profile=..., and the local profile equals plain snakemake
    assert resolved("--profile=env/profiles/slurm")["latency_wait"] == 120
    local = resolved("--profile", "env/profiles/local")
    assert {k: local[k] for k in ("cores", "latency_wait", "keep_going", "rerun_incomplete")} == \
        {"cores": __import__("os").cpu_count(), "latency_wait": 5, "keep_going": False, "rerun_incomplete": True}


# ---------------------------------------------------------------- rendered sbatch lines

class Job:
    """The attributes of a Snakemake job that the plugin's submit-string code reads."""
    def __init__(self, resources: dict, threads: int = 1):
        from snakemake.iocontainers import ResourceList   # a Snakemake job's resources
        self.resources = ResourceList(fromdict=dict(resources))
        self.threads = threads


def sbatch_line(res: dict, partition: str = "gpu") -> str:
    """The sbatch command snakemake-executor-plugin-slurm 2.8 builds for a job with these
    resources: its get_submit_command + set_gres_string, as in its run_job."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    job = Job(res)
    params = {"run_uuid": "U", "slurm_logfile": "L", "comment_str": "rule_train", "account": "",
              "partition": f"-p {partition}", "workdir": ""}
    call = get_submit_command(job, params) + set_gres_string(job)
    return call.split("--comment rule_train", 1)[1].split()


def step_runs_command_directly(res: dict) -> bool:
    """The plugin's job step (snakemake_executor_plugin_slurm_jobstep.run_job) runs the job's
    command in the batch script when an `mpi` resource exists, else inside `srun -n1`."""
    return "mpi" in Job(res).resources.keys()


@pytest.mark.parametrize("world, nodes", [(8, 1), (16, 2), (128, 16)])
def test_gpu_jobs_ask_for_one_task_per_gpu_rank(world, nodes):
    res = job_resources(gpu_cfg(world), "cuda")
    assert res == {"nodes": nodes, "tasks_per_node": 8, "cpus_per_task": 6, "mem_mb": 8 * 12000,
                   "gres": "gpu:8", "runtime": 240, "mpi": "srun"}
    assert sbatch_line(res) == ["-p", "gpu", "-t", "240", "--mem", "96000", f"--nodes={nodes}",
                                "--ntasks-per-node=8", "--cpus-per-task=6", "--gres=gpu:8"]
    assert step_runs_command_directly(res)


def test_one_gpu_run_is_one_task():
    res = job_resources(gpu_cfg(1), "cuda")
    assert sbatch_line(res) == ["-p", "gpu", "-t", "240", "--mem", "12000", "--nodes=1", "--cpus-per-task=6",
                                "--gres=gpu:1"]


def test_cpu_jobs():
    srun = job_resources(config.validate({"parallel": {"world_size": 2}, "launch": {"threads_per_rank": 1}}), "cpu")
    assert sbatch_line(srun, "test") == ["-p", "test", "-t", "60", "--mem", "4000", "--nodes=1",
                                         "--ntasks-per-node=2", "--cpus-per-task=1"]
    forked = job_resources(config.validate({"parallel": {"world_size": 4},
                                            "launch": {"launcher": "warm", "threads_per_rank": 2}}), "cpu")
    assert sbatch_line(forked, "test") == ["-p", "test", "-t", "60", "--mem", "8000", "--nodes=1", "--ntasks=1",
                                           "--cpus-per-task=8"]
    assert step_runs_command_directly(forked)   # mpi "" still keeps codist run out of a job step
    one = job_resources(config.validate({"parallel": {"world_size": 1}}), "cpu")
    assert sbatch_line(one, "test")[-2:] == ["--ntasks=1", "--cpus-per-task=1"]


def test_uneven_gpu_split_is_one_clear_error():
    with pytest.raises(ConfigError, match="world_size=20 does not split evenly over 3 nodes"):
        job_resources(gpu_cfg(20), "cuda")


def test_slurm_profile_dry_run(tmp_path):
    out = subprocess.run([SNAKEMAKE, "--profile", "env/profiles/slurm", "-n", "--config", f"results={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert "rule train:" in text and "This was a dry-run" in text
    assert "nodes=1" in text and "tasks_per_node=" in text and "cpus_per_task=" in text and "mpi=" in text


# ---------------------------------------------------------------- host lists

def test_expand_nodelist():
    assert expand_nodelist("gpu[01-02]") == ["gpu01", "gpu02"]
    assert expand_nodelist("gpu[01-02,05],cpu7") == ["gpu01", "gpu02", "gpu05", "cpu7"]
    assert expand_nodelist("n[8-10]") == ["n8", "n9", "n10"]
    assert expand_nodelist("rack[1-2]-node[01-02]") == ["rack1-node01", "rack1-node02",
                                                         "rack2-node01", "rack2-node02"]
    with pytest.raises(ValueError, match="unbalanced"):
        expand_nodelist("gpu[01-02")
    with pytest.raises(ValueError, match="range 'a-b'"):
        expand_nodelist("gpu[a-b]")


def test_hostnames_without_a_configured_scontrol_falls_back(monkeypatch):
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")
    assert hostnames("rack[1-2]-node[01-02]") == ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]
    assert hostnames("") == []


# ---------------------------------------------------------------- the ranks' srun line and environment

def test_srun_line_for_two_and_sixteen_nodes(tmp_path):
    entry = ["codist.rank.train", "--config", "C", "--out", "O"]
    for world, nodes in ((16, 2), (128, 16)):
        cmd = srun_command(gpu_cfg(world), "cuda", entry, "4711")
        # no --gpus-per-task: every rank sees its node's GPUs (NCCL's NVLink / CUDA IPC between them)
        # and takes the one at its LOCAL_RANK (issue 51, G2)
        assert cmd == ["srun", "--nodes", str(nodes), "--ntasks", str(world), "--ntasks-per-node", "8",
                       "--cpus-per-task", "6", "--kill-on-bad-exit=0", "--wait=60",
                       f"--export=ALL,MASTER_PORT={job_port(4711)},CODIST_OWNER=", PY, "-m", *entry]
    assert srun_command(gpu_cfg(16, master_port=29999), "cuda", entry, "4711")[11] == \
        "--export=ALL,MASTER_PORT=29999,CODIST_OWNER="
    # SLURM's one-GPU-per-task binding is an opt-in
    bound = srun_command(gpu_cfg(16, gpus_per_task=True), "cuda", entry, "4711")
    assert bound[9:12] == ["--gpus-per-task=1", "--kill-on-bad-exit=0", "--wait=60"]


def test_a_rank_seeing_its_nodes_gpus_takes_the_one_at_its_local_rank():
    """What an srun task without --gpus-per-task sees: the job's GPUs on its node in
    CUDA_VISIBLE_DEVICES (a step gets the job's GRES), SLURM_LOCALID its index among the node's tasks."""
    from codist.rank_env import gpu_index
    task = {"SLURM_PROCID": "11", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16", "SLURM_STEP_ID": "0",
            "SLURM_JOB_ID": "4711", "SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "SLURM_CONF": "/nonexistent/slurm.conf"}
    assert gpu_index({**task, **rank_env(task)}) == 3


def test_build_command_uses_srun_only_in_a_batch_script(tmp_path):
    cfg = gpu_cfg(16)
    batch = {"SLURM_JOB_ID": "77"}   # what the plugin's job step leaves codist run
    cmd = build_command(cfg, tmp_path / "c.yaml", tmp_path, 1, env=batch)
    assert cmd[:5] == ["srun", "--nodes", "2", "--ntasks", "16"]
    assert cmd[-5:] == ["codist.rank.train", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path)]
    # inside a job step (an srun task): never a nested srun
    step = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
    cpu = config.validate({"parallel": {"world_size": 2}, "launch": {"device": "cpu"}})
    assert build_command(cpu, tmp_path / "c.yaml", tmp_path, 5, env=step)[1:3] == ["-m", "deepspeed.launcher.runner"]
    assert build_command(cpu, tmp_path / "c.yaml", tmp_path, 5, env={"SLURM_JOB_ID": "1"})[0] == "srun"
    warm = config.validate({"parallel": {"world_size": 2}, "launch": {"device": "cpu", "launcher": "warm"}})
    assert build_command(warm, tmp_path / "c.yaml", tmp_path, 5, env={"SLURM_JOB_ID": "1"})[1:3] == \
        ["-m", "codist.launching.fork"]
    with pytest.raises(ConfigError, match="2 SLURM nodes .* not in a job's batch script"):
        build_command(cfg, tmp_path / "c.yaml", tmp_path, 1, env={"SLURM_JOB_NODELIST": "gpu[01-02]",
                                                                 "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"})


def test_gpu_world_larger_than_this_node_is_left_to_srun_in_a_batch_script(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, "check_cuda_fit", lambda device: None)   # (this machine has no NVIDIA driver)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 8)             # as on one node of 8 GPUs
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(ConfigError, match="world_size=128 does not fit: this machine has 8 GPU"):
        check_fits(gpu_cfg(128), "cuda")   # outside a job: this node's GPUs decide
    check_fits(gpu_cfg(8), "cuda")
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    check_fits(gpu_cfg(128), "cuda")   # in a batch script: no local GPU count check, the allocation decides
    cmd = build_command(gpu_cfg(128), tmp_path / "c.yaml", tmp_path, 1, env={"SLURM_JOB_ID": "9"})
    assert cmd[:6] == ["srun", "--nodes", "16", "--ntasks", "128", "--ntasks-per-node"]   # 16 nodes x 8


def test_rank_env_from_srun_variables(monkeypatch):
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")   # scontrol unusable: the fallback parser
    task = {"SLURM_PROCID": "9", "SLURM_LOCALID": "1", "SLURM_NTASKS": "16", "SLURM_STEP_ID": "0",
            "SLURM_JOB_ID": "4711", "SLURM_STEP_NODELIST": "rack[1-2]-node[01-02]",
            "SLURM_STEP_TASKS_PER_NODE": "8(x2)", "SLURM_CONF": "/nonexistent/slurm.conf"}
    assert rank_env(task) == {"RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
                              "MASTER_ADDR": "rack1-node01", "MASTER_PORT": str(job_port(4711))}
    assert "MASTER_PORT" not in rank_env({**task, "MASTER_PORT": "29999"})   # srun passed the config's
    assert rank_env({**task, "RANK": "0"}) == {}          # a launcher set the ranks already
    assert rank_env({"SLURM_PROCID": "0"}) == {}         # a batch script, not an srun task
    with pytest.raises(RuntimeError, match="without SLURM_LOCALID"):
        rank_env({k: v for k, v in task.items() if k != "SLURM_LOCALID"})


def test_rendezvous_ports_lie_outside_the_ephemeral_range():
    """Issue 51 (G7): ports derived from the job id were 20000-49999, inside Linux's ephemeral range
    (32768-60999 by default), where an outgoing connection on the first node may hold the port."""
    from codist.rank_env import PORT_BASE, PORT_SPAN
    ours = range(PORT_BASE, PORT_BASE + PORT_SPAN)
    assert {job_port(j) for j in range(0, 10 * PORT_SPAN, 7)} <= set(ours)
    ranges = [(49152, 65535)]   # IANA's dynamic ports (other systems' ephemeral range)
    proc = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if proc.exists():
        ranges.append(tuple(map(int, proc.read_text().split())))   # this machine's
    else:
        ranges.append((32768, 60999))   # Linux's default
    for lo, hi in ranges:
        assert ours.stop - 1 < lo or ours.start > hi, (ours, lo, hi)


def test_the_lm_data_job_of_the_full_plan_gets_a_cpu_partition_its_threads_and_its_corpus_size(tmp_path):
    """Issue 51 (G1): under the slurm profile the lm_data job got the profile's defaults (1 CPU under
    threads: 8, 8,000 MB, 60 min, partition gpu). Now, as Snakemake resolves it for an LM run of the
    full plan: cpus_per_task = its threads, the profile's CPU partition, memory and time limit
    from its corpus (a 5 GB .wet.gz shard under the data root: 15 GB of text)."""
    sys.path.insert(0, str(ROOT / "workflows"))
    from experiments import load_plan
    from codist.workloads.lm_data import prepare_resources
    root = tmp_path / "data"
    plan = load_plan(ROOT / "replications", "full", str(root))
    rid, cfg = next((r, c) for r, c in sorted(plan.configs.items())
                    if c.workload.name == "lm" and c.workload.dataset == "text")
    (root / cfg.workload.data_dir).mkdir(parents=True)
    with open(root / cfg.workload.data_dir / "CC-MAIN-0.warc.wet.gz", "wb") as f:
        f.truncate(5_000_000_000)   # sparse: only its size is read
    out = subprocess.run([SNAKEMAKE, "--profile", "env/profiles/slurm", "-n", "-s", "Snakefile", "--directory",
                          str(tmp_path / "work"), "--config", "scale=full", f"data_root={root}", "--",
                          f"results/full/lm_data/{rid}.done"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    job = (out.stdout + out.stderr).split("rule lm_data:", 1)[1].split("Shell command", 1)[0]
    threads = int(job.split("threads: ", 1)[1].split()[0])
    res = dict(kv.split("=", 1) for kv in job.split("resources: ", 1)[1].splitlines()[0].split(", "))
    assert int(res["cpus_per_task"]) >= threads == 8
    assert res["slurm_partition"] == "cpu"
    want = prepare_resources(cfg)
    assert (int(res["mem_mb"]), int(res["runtime"])) == (want["mem_mb"], want["runtime"])
    assert want["runtime"] > 3 * 60 and want["mem_mb"] > 8000   # not the profile's defaults
    assert sbatch_line({k: int(res[k]) for k in ("mem_mb", "runtime", "cpus_per_task")}, res["slurm_partition"]) == \
        ["-p", "cpu", "-t", res["runtime"], "--mem", res["mem_mb"], "--ntasks=1", "--cpus-per-task=8"]
