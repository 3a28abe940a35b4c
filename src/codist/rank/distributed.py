"""Process groups for n models x m data-parallel ranks each.

Global rank r trains model r // m. Every rank creates every group in the same order
(torch.distributed requires it). DeepSpeed learns its model's group through an `mpu`
object with exactly the six methods below (see ENGINE-FACTS: the model-parallel group
must be a single-rank group, and no other parallelism methods may exist).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..rank_env import apply_srun_env, gpu_index


@dataclass
class Topology:
    rank: int
    world_size: int
    models: int
    dp_groups: list            # one per model: its m ranks
    cross_groups: list         # one per local index: the n ranks with that index in each model
    single_groups: list        # one single-rank group per rank

    @property
    def ranks_per_model(self) -> int:
        return self.world_size // self.models

    @property
    def model_index(self) -> int:
        return self.rank // self.ranks_per_model

    @property
    def dp_rank(self) -> int:
        return self.rank % self.ranks_per_model

    @property
    def dp_group(self):
        return self.dp_groups[self.model_index]

    @property
    def cross_group(self):
        return self.cross_groups[self.dp_rank]

    def model_of(self) -> list[int]:
        return [r // self.ranks_per_model for r in range(self.world_size)]

    def mpu(self) -> "ModelGroupMPU":
        return ModelGroupMPU(self)


class ModelGroupMPU:
    """What DeepSpeed asks of an mpu: this rank's data-parallel group is its model's group."""

    def __init__(self, topo: Topology):
        self._t = topo

    def get_data_parallel_group(self):
        return self._t.dp_group

    def get_data_parallel_world_size(self):
        return self._t.ranks_per_model

    def get_data_parallel_rank(self):
        return self._t.dp_rank

    def get_model_parallel_group(self):
        return self._t.single_groups[self._t.rank]

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0


def init(models: int, backend: str, timeout_s: int = 600, device: torch.device | None = None) -> Topology:
    """Join the job (env:// rendezvous set by the launcher) and build the groups. A collective
    that waits longer than `timeout_s` (a dead or hung peer) raises instead of hanging. On a GPU
    the process group is bound to `device`, the rank's own (`pick_device`), not to the
    cuda:LOCAL_RANK DeepSpeed's init_distributed would bind it to (see `bound_device`)."""
    from datetime import timedelta

    import deepspeed

    from .comm import install_hooks
    install_hooks()    # before DeepSpeed's backend caches collectives: the meter sees all of them
    apply_srun_env()   # an srun task: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT from SLURM's
    if backend == "gloo":
        # with LOCAL_SIZE set (the DeepSpeed launcher sets it) DeepSpeed's CPU accelerator maps a 69 MB
        # /dev/shm buffer per rank for an shm all-reduce codist never uses, and never unlinks it
        os.environ.pop("LOCAL_SIZE", None)
    timeout = timedelta(seconds=timeout_s)
    bound = bound_device(device, int(os.environ.get("WORLD_SIZE", "1")))
    if bound is not None and not dist.is_initialized():
        # joined here, DeepSpeed's init_distributed finds the group made and only wraps it
        dist.init_process_group(backend, timeout=timeout, device_id=bound)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, timeout=timeout)
    return topology(models)


def bound_device(device: torch.device | None, world_size: int) -> torch.device | None:
    """The device a rank's process group is bound to (init_process_group's device_id): the rank's
    own GPU, under DeepSpeed's own conditions for binding one (deepspeed.comm.torch): a CUDA
    device, more than one rank (a bound group splits every later group's communicator from the
    world's, which a one-rank job has no peer for) and not torch 2.6.0 < v < 2.7.1 (binding hangs
    there, pytorch#153960). DeepSpeed binds cuda:LOCAL_RANK, which is no device where srun shows
    each task only its own GPU (--gpus-per-task=1: LOCAL_RANK 3, one visible GPU, device 0)."""
    from packaging.version import Version
    if device is None or device.type != "cuda" or world_size == 1:
        return None
    if Version("2.6.0") < Version(torch.__version__.split("+")[0]) < Version("2.7.1"):
        return None
    return device


def topology(models: int) -> Topology:
    """This rank's groups for `models` models over the joined world (every rank calls it alike)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    m = world // models
    dp_groups = [dist.new_group(list(range(i * m, (i + 1) * m))) for i in range(models)]
    cross_groups = [dist.new_group([i * m + j for i in range(models)]) for j in range(m)]
    single_groups = [dist.new_group([r]) for r in range(world)]
    return Topology(rank, world, models, dp_groups, cross_groups, single_groups)


def pick_device(requested: str) -> tuple[torch.device, str]:
    """(device, backend) for this rank: NCCL on GPUs, gloo on CPU. The one place a rank's device is
    chosen: its process group is bound to it (`init`), its models and engine live on it, its data
    and evaluation batches are moved to it (TrainContext.device)."""
    apply_srun_env()   # an srun task's LOCAL_RANK picks its GPU
    use_cuda = requested == "cuda" or (requested == "auto" and torch.cuda.is_available())
    if use_cuda:
        local = gpu_index(os.environ)   # 0 where srun gives each task its own GPU, else LOCAL_RANK
        torch.cuda.set_device(local)
        return torch.device("cuda", local), "nccl"
    return torch.device("cpu"), "gloo"
