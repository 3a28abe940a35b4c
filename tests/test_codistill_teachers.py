"""Teachers are really stale: between exchanges a teacher copy does not change; right after an
exchange it equals the other model's parameters at that moment. Two ranks, Codistill driven
step by step inside real processes."""
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

pytestmark = pytest.mark.slow
STEPS, K, BURN_IN = 7, 3, 1


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), DS_ACCELERATOR="cpu")
    torch.set_num_threads(1)
    from conftest import TINY, deep_update
    from codist import config
    from codist.algorithms import TrainContext
    from codist.algorithms.codistill import Codistill
    from codist.algorithms.state import flat_state
    from codist.comm import CommMeter
    from codist.data import BatchStream
    from codist.distributed import init
    from codist.workloads import build_workload

    cfg = config.validate(deep_update(TINY, {
        "parallel": {"world_size": 2, "models": 2},
        "algorithm": {"name": "codistill", "exchange_every": K, "burn_in": BURN_IN, "data": "same"}}))
    topo = init(2, "gloo")
    meter = CommMeter(topo.rank, topo.model_of())
    meter.install_hooks()
    workload = build_workload(cfg.workload, cfg.seed)
    algo = Codistill(TrainContext(cfg, topo, meter, workload, torch.device("cpu")))
    algo.setup()
    stream = BatchStream(workload.train_dataset(), cfg.train.batch_per_rank, 1, 0, cfg.seed)
    other = 1 - rank
    own_before, teacher_after = [], []
    for step in range(STEPS):
        own_before.append(flat_state(algo.model).clone())
        algo.train_step(step, stream.batch(step))
        teacher_after.append(flat_state(algo.teachers[other]).clone())
    out[rank] = (own_before, teacher_after, algo.exchanges)
    torch.distributed.destroy_process_group()


def test_teacher_is_a_stale_copy_refreshed_every_k_steps():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_worker, args=(2, port, out), nprocs=2)
        res = dict(out)
    exchange_steps = set(range(BURN_IN, STEPS, K))          # {1, 4}
    for rank in (0, 1):
        _, teacher, exchanges = res[rank]
        other_before = res[1 - rank][0]
        assert exchanges == len(exchange_steps)
        for step in range(BURN_IN, STEPS):
            if step in exchange_steps:   # refreshed before this step's forward: the other model right then
                assert torch.equal(teacher[step], other_before[step])
            else:                        # untouched between exchanges, though the other model moved on
                assert torch.equal(teacher[step], teacher[step - 1])
                assert not torch.equal(teacher[step], other_before[step])
