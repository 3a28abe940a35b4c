"""What a GPU run sets up, checked without a GPU: TF32 (`train.tf32`) and DeepSpeed's timers as the
real libraries read them, both recorded in the run's manifest; run ids kept. One test (marked cuda)
runs on a real GPU: a rank at LOCAL_RANK 3 with one visible GPU joining NCCL."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from codist import config
from codist.runtime.cuda_defaults import backend_settings, configure_backends
from codist.runtime.engine import deepspeed_config
from conftest import TINY, comparable, deep_update, launch_run, read_rows
from torch_backends import restore_backends  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[1]


#: what backend_settings says of a process not asked for deterministic kernels
NOT_DETERMINISTIC = {"deterministic_algorithms": False, "cublas_workspace_config": None}


def tiny(**train) -> config.RunConfig:
    return config.validate(deep_update(TINY, {"train": train}))


def test_tf32_is_on_by_default_and_keeps_every_committed_run_id():
    assert tiny().train.tf32 is True
    assert tiny(tf32=True).run_id() == tiny().run_id() != tiny(tf32=False).run_id()
    from workflows.experiments import EVERY_TIER, load_plan
    from workflows.frontier_plan import load_points
    planned = set(load_plan(ROOT / "replications", "embedded", tier=EVERY_TIER).configs)
    _, frontier = load_points(ROOT / "replications/frontier/frontier.yaml", ROOT / "replications", "embedded")
    planned |= {p.run_id for p in frontier}
    committed = {r["run_id"] for path in (ROOT / "results" / "embedded").glob("*/*_runs.json")
                 for r in json.loads(path.read_text())["runs"]}
    assert len(committed) > 20 and committed <= planned


def test_tf32_is_set_on_a_cuda_device_only(restore_backends):
    # (torch sets these flags without a GPU: they are what cuBLAS and cuDNN read once one exists)
    cpu_defaults = backend_settings()
    configure_backends(torch.device("cpu"), tf32=True)
    assert backend_settings() == cpu_defaults == {"float32_matmul_precision": "highest", "cudnn_allow_tf32": True,
                                                  "cudnn_benchmark": False, **NOT_DETERMINISTIC}
    configure_backends(torch.device("cuda", 0), tf32=True)
    assert backend_settings() == {"float32_matmul_precision": "high", "cudnn_allow_tf32": True,
                                  "cudnn_benchmark": True, **NOT_DETERMINISTIC}
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"   # what cuBLAS's fp32 matmuls read
    configure_backends(torch.device("cuda", 0), tf32=False)
    assert backend_settings() == {"float32_matmul_precision": "highest", "cudnn_allow_tf32": False,
                                  "cudnn_benchmark": True, **NOT_DETERMINISTIC}
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"


def test_deterministic_mode_sets_torch_cudnn_and_cublas_on_any_device(restore_backends, monkeypatch):
    """train.deterministic (issue 51): deterministic kernels, no cuDNN autotuning (a GPU run's default
    otherwise) and cuBLAS's deterministic workspace; off by default; part of the run id only when on."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert tiny().train.deterministic is False
    assert tiny(deterministic=False).run_id() == tiny().run_id() != tiny(deterministic=True).run_id()
    configure_backends(torch.device("cuda", 0), tf32=True, deterministic=True)
    assert backend_settings() == {"float32_matmul_precision": "high", "cudnn_allow_tf32": True,
                                  "cudnn_benchmark": False, "deterministic_algorithms": True,
                                  "cublas_workspace_config": ":4096:8"}
    assert torch.backends.cudnn.deterministic is True
    with pytest.raises(config.ConfigError, match="train.deterministic"):
        config.validate(deep_update(TINY, {"train": {"deterministic": "yes please"}}))


def test_a_deterministic_run_applies_it_in_its_rank(tmp_path):
    """A real CPU run (its rank a process of its own) with train.deterministic: its manifest records
    what the rank's torch says once set up, and two runs give the same rows."""
    rows = []
    for name in ("a", "b"):
        run = launch_run(tmp_path / name, {"train": {"deterministic": True}})
        math = json.loads((run / "manifest.json").read_text())["math"]
        assert math["deterministic_algorithms"] is True and math["cublas_workspace_config"] == ":4096:8"
        assert math["cudnn_benchmark"] is False
        rows.append(comparable(read_rows(run)))
    assert rows[0] == rows[1] and rows[0]


def test_deepspeed_reads_every_timer_off():
    """DeepSpeed's own config parser on the engine config of a run: the throughput timer (on by
    default, two device synchronisations per step), the wall-clock breakdown, the flops profiler and
    the comms logger (on whenever its key exists) are all off, for every precision."""
    from deepspeed.runtime.config import DeepSpeedConfig
    default = DeepSpeedConfig({"train_batch_size": 16})
    assert default.timers_config.enabled and default.timers_config.synchronized   # what we turn off
    for precision in ("fp32", "bf16", "fp16"):
        ds = DeepSpeedConfig(deepspeed_config(tiny(precision=precision)))
        assert not ds.timers_config.enabled and not ds.timers_config.synchronized
        assert not ds.wall_clock_breakdown and not ds.flops_profiler_config.enabled
        assert not ds.comms_config.comms_logger_enabled and not ds.monitor_config.enabled


def test_the_manifest_records_tf32_and_the_engine_config(tmp_path):
    run = launch_run(tmp_path / "run", {"train": {"tf32": False}})
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["train"]["tf32"] is False
    assert manifest["deepspeed_config"]["timers"] == {"throughput": {"enabled": False, "synchronized": False}}
    assert manifest["deepspeed_config"]["wall_clock_breakdown"] is False
    # a CPU run leaves the math backends as torch starts them
    assert manifest["math"] == {"float32_matmul_precision": "highest", "cudnn_allow_tf32": True,
                                "cudnn_benchmark": False, **NOT_DETERMINISTIC}


# --------------------------------------------------------------------------- which GPU a rank uses

def test_a_rank_given_one_gpu_uses_device_0_else_its_local_rank():
    from codist.rank_env import gpu_index
    # srun --gpus-per-task=1: SLURM sets each task's CUDA_VISIBLE_DEVICES to its own GPU (its index on
    # the node without device cgroups, "0" with them): CUDA numbers it 0 in that process
    assert gpu_index({"LOCAL_RANK": "5", "SLURM_LOCALID": "5", "CUDA_VISIBLE_DEVICES": "5"}) == 0
    assert gpu_index({"LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "0"}) == 0
    assert gpu_index({"LOCAL_RANK": "3", "SLURM_GPUS_PER_TASK": "1"}) == 0
    # the launcher's ranks share the node's GPUs (deepspeed / torchrun on one machine, or an srun without binding)
    assert gpu_index({"LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}) == 3
    assert gpu_index({"LOCAL_RANK": "3"}) == 3 and gpu_index({}) == 0
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK=3 but CUDA_VISIBLE_DEVICES='0,1' shows 2 GPU\(s\)"):
        gpu_index({"LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "0,1"})


def test_the_srun_line_binds_one_gpu_per_gpu_rank_only_when_asked():
    """Default: no binding (every rank sees its node's GPUs, issue 51); launch.gpus_per_task binds
    one GPU per GPU rank, never a CPU rank's."""
    from codist.launching.cluster import srun_command
    entry = ["codist.rank.train", "--config", "C", "--out", "O"]
    gpu = config.validate({"parallel": {"world_size": 16}, "launch": {"device": "cuda"}})
    bound = config.validate({"parallel": {"world_size": 16}, "launch": {"device": "cuda", "gpus_per_task": True}})
    cpu = config.validate({"parallel": {"world_size": 2}, "launch": {"device": "cpu", "launcher": "torchrun",
                                                                     "gpus_per_task": True}})
    assert not any(a.startswith("--gpu") for a in srun_command(gpu, "cuda", entry, "7"))
    assert "--gpus-per-task=1" in srun_command(bound, "cuda", entry, "7")
    assert not any(a.startswith("--gpu") for a in srun_command(cpu, "cpu", entry, "7"))


def test_the_engine_is_told_the_models_gpu_not_local_rank(monkeypatch):
    """DeepSpeed's engine calls set_device(args.device_rank if given, else LOCAL_RANK): build_engine
    gives it the GPU the model is on (the rank's device), and nothing on CPU."""
    import deepspeed

    from codist.runtime import engine
    from codist.runtime.distributed import Topology
    seen = []
    monkeypatch.setattr(deepspeed, "initialize", lambda **kw: seen.append(kw["args"]) or (object(), None, None, None))
    monkeypatch.setattr(engine, "build_optimizer", lambda params, cfg: None)
    monkeypatch.setattr(engine, "build_scheduler", lambda opt, cfg, steps: None)
    monkeypatch.setenv("LOCAL_RANK", "5")

    class OnGpu(torch.nn.Module):   # a module whose parameters report a CUDA device (no GPU needed)
        def parameters(self):
            return iter([type("P", (), {"device": torch.device("cuda", 0)})()])
    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": 2}}))
    topo = Topology(0, 2, 1, [None], [None, None], [None, None])
    engine.build_engine(cfg, topo, OnGpu())
    engine.build_engine(cfg, topo, torch.nn.Linear(2, 2))
    assert seen[0].device_rank == 0 and seen[1] is None


def test_one_visible_gpu_at_local_rank_3_is_device_0_and_the_process_group_is_bound_to_none(monkeypatch):
    """srun --gpus-per-task=1 shows each task one GPU while its LOCAL_RANK stays 3: the rank picks
    cuda:0, and codist joins the process group itself, bound to no device, so DeepSpeed only wraps
    it. DeepSpeed's own init_distributed runs here, its accelerator saying CUDA and torch.distributed's
    rendezvous recorded instead of joined (no GPU here). Left to DeepSpeed, the group was bound to
    cuda:3 (LOCAL_RANK): on a real node "invalid device ordinal" at start-up for every local rank but
    0; bound to any device, every later new_group is a world-wide communicator split (issue 51, G3)."""
    import importlib

    import torch.distributed as dist
    from deepspeed.accelerator import get_accelerator

    from codist.runtime import comm, distributed
    ds_comm = importlib.import_module("deepspeed.comm.comm")
    ds_torch = importlib.import_module("deepspeed.comm.torch")   # (deepspeed.comm.torch is also torch itself)
    for key, value in {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "CUDA_VISIBLE_DEVICES": "3"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    set_to, joined = [], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", set_to.append)

    def init_process_group(backend, *, device_id=None, **kw):   # (DeepSpeed looks for device_id in its signature)
        joined.append((backend, device_id))
    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    monkeypatch.setattr(dist, "is_initialized", lambda: bool(joined))
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
    accelerator = get_accelerator()
    monkeypatch.setattr(accelerator, "device_name", lambda index=None: "cuda" if index is None else f"cuda:{index}")
    monkeypatch.setattr(accelerator, "device", lambda index=None: torch.device("cuda", index or 0))
    monkeypatch.setattr(ds_torch, "build_shm_op", lambda: None)   # the CPU accelerator's op: not a GPU's
    monkeypatch.setattr(ds_comm, "cdb", None)
    monkeypatch.setattr(comm, "install_hooks", lambda: None)
    monkeypatch.setattr(distributed, "topology", lambda models, timeout: "groups")

    device, backend = distributed.pick_device("cuda")
    assert (device, backend) == (torch.device("cuda", 0), "nccl") and set_to == [0]
    assert distributed.init(8, backend, timeout_s=60) == "groups"
    assert joined == [("nccl", None)]   # joined once, by codist, unbound




def test_gloo_backend_shares_the_visible_gpus_round_robin(monkeypatch):
    """launch.backend gloo on CUDA: LOCAL_RANK modulo the visible GPUs, and gloo for the process group; so
    two ranks fit one GPU (check_fits), which NCCL's one rank a GPU refuses. The GPU functions are faked
    here (no GPU on this machine): this checks the choice, not a GPU; the cuda-marked test below runs it."""
    from codist.launching import launch
    from codist.runtime import distributed
    set_to = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", set_to.append)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert distributed.pick_device("cuda", "gloo") == (torch.device("cuda", 0), "gloo") and set_to == [0]
    assert distributed.pick_device("cuda") == (torch.device("cuda", 1), "nccl")   # NCCL: its own GPU
    monkeypatch.setattr(launch, "check_cuda_fit", lambda device: None)
    two = deep_update(TINY, {"parallel": {"world_size": 2, "models": 1},
                             "launch": {"device": "cuda", "launcher": "torchrun"}})
    with pytest.raises(config.ConfigError, match=r"1 GPU\(s\); allowed: 1..1 .*launch.backend=gloo"):
        launch.check_fits(config.validate(two), "cuda", memory=64_000)
    launch.check_fits(config.validate(deep_update(two, {"launch": {"backend": "gloo"}})), "cuda", memory=64_000)



ONE_GPU_RANK = """
import torch, torch.distributed as dist
from codist.runtime import distributed
device, backend = distributed.pick_device("cuda")
distributed.init(1, backend, timeout_s=120)
x = torch.full((4,), 2.0, device=device)
dist.all_reduce(x)
torch.cuda.synchronize()
print(device, backend, dist.get_backend(), x.device, float(x.sum()))
"""


TWO_RANKS_ONE_GPU = """
import os, torch, torch.distributed as dist
from codist.runtime import distributed
device, backend = distributed.pick_device("cuda", "gloo")
distributed.init(2, backend, timeout_s=120)
x = torch.full((4,), float(dist.get_rank() + 1), device=device)
dist.all_reduce(x)
y = torch.arange(3.0, device=device) * (dist.get_rank() + 1)
dist.broadcast(y, src=1)
torch.cuda.synchronize()
print(device, dist.get_backend(), x.device, float(x.sum()), y.tolist())
"""


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_real_gpu_two_ranks_share_it_over_gloo():
    """launch.backend gloo: two ranks on one GPU join over gloo through DeepSpeed's init_distributed and
    all-reduce and broadcast CUDA tensors (what `make gpu-check` relies on with one GPU)."""
    import os
    import subprocess

    from codist.launching.launch import free_port
    port = str(free_port())
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    procs = [subprocess.Popen([sys.executable, "-c", TWO_RANKS_ONE_GPU], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2",
                                              "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                              "CUDA_VISIBLE_DEVICES": gpu})
             for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    for out, _ in outs:
        assert out.split("cuda:0 gloo cuda:0 12.0 ")[-1].strip() == "[0.0, 2.0, 4.0]", out


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_real_gpu_local_rank_3_with_one_visible_gpu_joins_nccl_on_device_0():
    """The srun --gpus-per-task=1 case on a real GPU, NCCL and DeepSpeed (the test above fakes the
    accelerator): LOCAL_RANK 3 and one visible GPU; the rank picks cuda:0, joins the job over NCCL
    through DeepSpeed's init_distributed and reduces a tensor there. (One GPU holds one NCCL rank, so
    the world here is 1.)"""
    import os
    import subprocess

    from codist.launching.launch import free_port
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "3", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]}
    env.pop("SLURM_PROCID", None)
    done = subprocess.run([sys.executable, "-c", ONE_GPU_RANK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-5:] == ["cuda:0", "nccl", "nccl", "cuda:0", "8.0"]
