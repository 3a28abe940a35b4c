"""The meter's byte formulas, on real gloo collectives between two processes."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codist.comm import CATEGORIES, CommMeter, ring_all_reduce_bytes, summarize


def test_ring_all_reduce_closed_form():
    assert ring_all_reduce_bytes(1000, 1) == 0
    assert ring_all_reduce_bytes(1000, 2) == 1000
    assert ring_all_reduce_bytes(1000, 4) == 1500
    assert ring_all_reduce_bytes(4096, 8) == 2 * 7 * 4096 // 8


def test_unknown_category_rejected():
    meter = CommMeter(rank=0, model_of=[0])
    with pytest.raises(ValueError, match="unknown communication category"):
        with meter.category("gossip"):
            pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # 4 ranks as 2 models x 2 ranks: groups {0,1} {2,3} inside models, {0,2} {1,3} across
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    cross = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    meter = CommMeter(rank, model_of=[0, 0, 1, 1])
    meter.install_hooks()
    t = torch.ones(250)  # 1000 bytes
    with meter.category("grad_allreduce"):
        meter.all_reduce(t, group=groups[rank // 2])
    with meter.category("param_exchange"):
        src = [0, 1][rank % 2]          # model 0's rank broadcasts to model 1's rank
        meter.broadcast(t, src=src, group=cross[rank % 2])
    meter.all_reduce(torch.ones(10), category="model_average")   # world, spans both models
    with meter.category("prediction_exchange"):                 # a plain torch.distributed call is seen too
        peer = rank ^ 2                                           # 0<->2, 1<->3: across models
        reqs = [dist.isend(torch.ones(5), peer), dist.irecv(torch.empty(5), peer)]
        for r in reqs:
            r.wait()
    ok = torch.equal(t, torch.full((250,), 2.0))                 # the collectives really ran
    out[rank] = (meter.as_tensor(), ok)
    dist.destroy_process_group()


def test_meter_counts_real_collectives_by_formula_and_tier():
    world = 4
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_worker, args=(world, _free_port(), out), nprocs=world)
        results = dict(out)
    assert all(ok for _, ok in results.values())
    totals = sum(t for t, _ in results.values())
    s = summarize(totals, world_size=world, updates=1)["by_category"]
    # all-reduce of 1000 B over 2 ranks: each rank sends 2*(2-1)/2*1000 = 1000 B, within its model
    assert s["grad_allreduce"]["sent_bytes_all_ranks"] == 4 * 1000
    assert s["grad_allreduce"]["between_group_sent_bytes"] == 0
    # broadcast between models: 2 roots send 1000 B to one receiver each; receivers get 1000 B
    assert s["param_exchange"]["sent_bytes_all_ranks"] == 2 * 1000
    assert s["param_exchange"]["recv_bytes_all_ranks"] == 2 * 1000
    assert s["param_exchange"]["between_group_sent_bytes"] == 2 * 1000
    # world all-reduce of 40 B over 4 ranks: 2*3/4*40 = 60 B per rank, between models
    assert s["model_average"]["sent_bytes_all_ranks"] == 4 * 60
    assert s["model_average"]["between_group_sent_bytes"] == 4 * 60
    # point-to-point: each rank sends 20 B and receives 20 B, between models
    assert s["prediction_exchange"]["sent_bytes_all_ranks"] == 4 * 20
    assert s["prediction_exchange"]["recv_bytes_all_ranks"] == 4 * 20
    assert s["prediction_exchange"]["between_group_sent_bytes"] == 4 * 20
    assert set(s) <= set(CATEGORIES)
