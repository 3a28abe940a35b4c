"""Cluster launch: the multi-node DeepSpeed command for a faked 2 x 8-GPU SLURM job, the
job resources derived from a run config, and a dry run with the slurm profile."""
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from codist import config
from codist.config import ConfigError
from codist.launch import build_command, cluster_resources, expand_nodelist

FULL = {"parallel": {"world_size": 16}, "launch": {"device": "cuda", "gpus_per_node": 8, "cpus_per_rank": 6,
                                                   "time_limit_min": 240, "mem_mb_per_rank": 12000}}


def test_expand_slurm_nodelist():
    assert expand_nodelist("gpu[01-02]") == ["gpu01", "gpu02"]
    assert expand_nodelist("gpu[01-02,05],cpu7") == ["gpu01", "gpu02", "gpu05", "cpu7"]
    assert expand_nodelist("n[8-10]") == ["n8", "n9", "n10"]


def test_two_node_launch_command(tmp_path):
    cfg = config.validate(FULL)
    env = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_NUM_NODES": "2"}
    cmd = build_command(cfg, tmp_path / "config.yaml", tmp_path, 29611, env=env)
    assert cmd[:3] == [sys.executable, "-m", "deepspeed.launcher.runner"]
    args = dict(zip(cmd[3::1], cmd[4::1]))
    assert args["--hostfile"] == str(tmp_path / "hostfile")
    assert args["--num_nodes"] == "2" and args["--num_gpus"] == "8"
    assert args["--launcher"] == "slurm" and args["--master_addr"] == "gpu01" and args["--master_port"] == "29611"
    assert cmd[-6:] == ["--module", "codist.train", "--config", str(tmp_path / "config.yaml"),
                        "--out", str(tmp_path)]
    assert (tmp_path / "hostfile").read_text() == "gpu01 slots=8\ngpu02 slots=8\n"


def test_multi_node_needs_deepspeed_and_even_split(tmp_path):
    env = {"SLURM_JOB_NODELIST": "gpu[01-02]"}
    with pytest.raises(ConfigError, match="allowed: deepspeed"):
        build_command(config.validate({**FULL, "launch": {**FULL["launch"], "launcher": "torchrun"}}),
                      tmp_path / "c.yaml", tmp_path, 1, env=env)
    with pytest.raises(ConfigError, match="does not fit 2 nodes evenly"):
        build_command(config.validate({**FULL, "parallel": {"world_size": 15}}), tmp_path / "c.yaml", tmp_path, 1,
                      env=env)


def test_single_node_commands(tmp_path):
    cfg = config.validate({"parallel": {"world_size": 2}})
    ds = build_command(cfg, tmp_path / "c.yaml", tmp_path, 29500, env={})
    assert ds[3:7] == ["--num_gpus", "2", "--master_port", "29500"] and "--hostfile" not in ds
    tr = build_command(config.validate({"parallel": {"world_size": 2}, "launch": {"launcher": "torchrun"}}),
                       tmp_path / "c.yaml", tmp_path, 29500, env={})
    assert tr[1:5] == ["-m", "torch.distributed.run", "--nproc_per_node", "2"]


def test_job_resources_derive_from_the_run_config():
    res = cluster_resources(config.validate(FULL), "cuda")
    assert res == {"nodes": 2, "tasks": 1, "runtime": 240, "cpus_per_task": 8 * 6, "mem_mb": 8 * 12000,
                   "gres": "gpu:8"}
    cpu = cluster_resources(config.validate({"parallel": {"world_size": 4},
                                             "launch": {"threads_per_rank": 2}}), "cpu")
    assert cpu["nodes"] == 1 and cpu["cpus_per_task"] == 8 and "gres" not in cpu


def test_slurm_profile_dry_run(tmp_path):
    out = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--profile", "env/profiles/slurm", "-n",
                          "--config", f"results={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert "rule train:" in text and "This was a dry-run" in text
    assert "nodes=1" in text and "cpus_per_task=" in text and "runtime=" in text
