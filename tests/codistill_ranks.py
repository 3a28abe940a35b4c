"""Two real ranks driving Codistill step by step (tests/test_codistill_teachers.py,
tests/test_train_loss.py): the process setup both share."""
import os
import socket

import torch
import torch.multiprocessing as mp


def start(rank: int, port: int, algorithm: dict, stream_rank: int = 0):
    """On one of 2 ranks: (workload, set-up Codistill, its batch stream) for TINY with `algorithm`."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", DS_ACCELERATOR="cpu")
    torch.set_num_threads(1)
    from conftest import TINY, deep_update
    from codist import config
    from codist.algorithms import TrainContext
    from codist.algorithms.codistill import Codistill
    from codist.runtime.comm import CommMeter
    from codist.runtime.data import BatchStream
    from codist.runtime.distributed import init
    from codist.workloads import build_workload

    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                                             "algorithm": {"name": "codistill", **algorithm}}))
    topo = init(2, "gloo")
    meter = CommMeter(topo.rank, topo.model_of())
    meter.install_hooks()
    workload = build_workload(cfg.workload, cfg.seed)
    algo = Codistill(TrainContext(cfg, topo, meter, workload, torch.device("cpu")))
    algo.setup()
    return workload, algo, BatchStream(workload.train_dataset(), cfg.train.batch_per_rank, 1, stream_rank, cfg.seed)


def spawn(worker) -> dict:
    """Run worker(rank, port, out) on 2 processes; returns {rank: what it put in out}."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(worker, args=(port, out), nprocs=2)
        return dict(out)
