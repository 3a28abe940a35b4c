"""Post-local SGD's models start from one shared initialisation (`shared_init`, issue 52: its
mutation survivor): its world-wide DDP broadcasts rank 0's parameters when it is built, so every
group trains from model 0's, and what a rank rebuilds as its initial parameters (`initial_parameters`:
the init_distance probe's origin, and a resumed run's) must be those, not its own seed's."""
from __future__ import annotations

import os

import torch
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload


def _start_and_origin(rank):
    from codist.algorithms import TrainContext, build_algorithm
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), WORLD_SIZE="2")
    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                                             "algorithm": {"name": "post_local_sgd", "tau": 2}}))
    topo = topology(2)
    algo = build_algorithm(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                        build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
    algo.setup()
    return [p.detach().clone() for p in algo.model.parameters()], algo.initial_parameters()


def test_each_group_starts_from_the_shared_initialisation_it_rebuilds():
    got = forked_world.run(2, _start_and_origin)
    for rank, (start, origin) in got.items():
        assert all(torch.equal(a, b) for a, b in zip(start, got[0][0])), rank   # model 0's, broadcast
        assert all(torch.equal(a, b) for a, b in zip(start, origin)), rank      # and what it rebuilds
