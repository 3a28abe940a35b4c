"""Process groups for n models x m data-parallel ranks each.

Global rank r trains model r // m. Each rank creates only the groups it is in (its model's, its
local index's across models, its own), with their members alone (`topology`). DeepSpeed learns
its model's group through an `mpu` object with exactly the six methods below (see ENGINE-FACTS:
the model-parallel group must be a single-rank group, and no other parallelism methods may exist).
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
    dp_group: object           # this rank's model's m ranks
    cross_group: object        # the n ranks with this rank's local index in each model
    single_group: object       # this rank alone (DeepSpeed's model-parallel group)

    @property
    def ranks_per_model(self) -> int:
        return self.world_size // self.models

    @property
    def model_index(self) -> int:
        return self.rank // self.ranks_per_model

    @property
    def dp_rank(self) -> int:
        return self.rank % self.ranks_per_model

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
        return self._t.single_group

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0


def init(models: int, backend: str, timeout_s: int = 1800) -> Topology:
    """Join the job (env:// rendezvous set by the launcher) and build the groups. A collective
    that waits longer than `timeout_s` (a dead or hung peer) raises instead of hanging: the
    start-up's limit (launch.start_timeout_s); `set_timeout` gives the training its own.

    The default group is joined here, bound to no device: DeepSpeed's init_distributed then finds
    it made and only wraps it (it would bind cuda:LOCAL_RANK, no device where srun shows a task
    only its own GPU). Bound, every later new_group would be an eager split of the world's NCCL
    communicator, which every rank of the world must join (ncclCommSplit is collective over its
    parent): `topology`'s groups would cost each rank O(world) collective calls at every start.
    Unbound, a group's communicator is made at its first collective, by its members only, on the
    device pick_device made current."""
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
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timeout)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, timeout=timeout)
    return topology(models, timeout)


def topology(models: int, timeout=None) -> Topology:
    """This rank's groups for `models` models over the joined world (every rank calls it alike).

    Only the three groups this rank belongs to are made, each by its members alone
    (use_local_synchronization): 3 new_group calls a rank at any world size, not models + m + world.
    torch names such a group by its ranks and its creation count, so every rank must make the same
    number of groups before each: here all make exactly these three, in this order."""
    rank, world = dist.get_rank(), dist.get_world_size()
    m = world // models
    model, local = rank // m, rank % m

    def group(ranks: list[int]):
        return dist.new_group(ranks, timeout=timeout, use_local_synchronization=True)
    dp = group(list(range(model * m, (model + 1) * m)))
    cross = group([i * m + local for i in range(models)])
    single = group([rank])
    return Topology(rank, world, models, dp, cross, single)


def set_timeout(topo: Topology, timeout_s: int) -> None:
    """From here on a collective of the world or of this rank's groups fails after `timeout_s`
    (launch.collective_timeout_s: the training's limit, once start-up is over)."""
    from datetime import timedelta
    timeout = timedelta(seconds=timeout_s)
    for group in dict.fromkeys([None, topo.dp_group, topo.cross_group, topo.single_group]):
        dist.distributed_c10d.set_timeout(timeout, group)


def pick_device(requested: str, backend: str = "auto") -> tuple[torch.device, str]:
    """(device, backend) for this rank: NCCL on GPUs, gloo on CPU (launch.backend "auto"). The one
    place a rank's device is chosen: its process group is bound to it (`init`), its models and engine
    live on it, its data and evaluation batches are moved to it (TrainContext.device).

    launch.backend "gloo" on GPUs: the node's ranks share its visible GPUs round-robin (LOCAL_RANK
    modulo their count), which NCCL refuses (one communicator rank a GPU) and gloo allows, staging
    CUDA tensors through host memory: one GPU then runs a world of several ranks."""
    apply_srun_env()   # an srun task's LOCAL_RANK picks its GPU
    use_cuda = requested == "cuda" or (requested == "auto" and torch.cuda.is_available())
    if use_cuda:
        if backend == "gloo":
            local = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
        else:
            local = gpu_index(os.environ)   # 0 where srun gives each task its own GPU, else LOCAL_RANK
        torch.cuda.set_device(local)
        return torch.device("cuda", local), "gloo" if backend == "gloo" else "nccl"
    return torch.device("cpu"), "gloo"
