"""Every tensor that enters a collective lives on the run's device (issue 28): NCCL has no CPU
backend, so a CPU tensor in a collective stops a GPU run, while gloo here accepts it.

The run's device here is `meta`, a device other than the CPU that this machine has: two real gloo
ranks (gloo runs a collective of meta tensors as a no-op), the meter's own device check, and the
training loop's real call sites building their tensors with the run's device. A call site that
builds a CPU tensor fails with the meter's one-line error naming it. Meta tensors hold no values,
so the loop's call sites that read a collective's result on the host (the stop flag, the
evaluation table, the traffic totals) stop right after it: the collective counted by the meter is
what shows that it passed the check. The algorithms' exchanges never read on the host: they run
whole."""
import re

import pytest
import torch
import torch.distributed as dist
from codistill_ranks import spawn
from conftest import TINY, deep_update

META = torch.device("meta")


def join(rank: int, port: int):
    """Join a 2-rank gloo world as 2 models of one rank: (topology, the meter on the meta device)."""
    import os
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", DS_ACCELERATOR="cpu")
    torch.set_num_threads(1)
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import init
    topo = init(2, "cpu:gloo,meta:gloo", timeout_s=60)   # meta registered: batch_isend_irecv asks for its backend
    meter = CommMeter(topo.rank, topo.model_of(), META)
    meter.install_hooks()
    return topo, meter


def algorithm_on(topo, meter, algorithm: dict):
    """(context, `algorithm` set up on the meta device) for TINY at 2 models."""
    from codist import config
    from codist.algorithms import TrainContext, build_algorithm
    from codist.workloads import build_workload
    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": 2, "models": 2}, "algorithm": algorithm}))
    meter.counts.clear()
    ctx = TrainContext(cfg, topo, meter, build_workload(cfg.workload, cfg.seed), META)
    algo = build_algorithm(ctx)
    algo.setup()
    return ctx, algo


def calls(meter, category: str) -> int:
    return sum(c.calls for (cat, _), c in meter.counts.items() if cat == category)


def stops_at_host_read(call) -> None:
    """`call` ran its collective on meta tensors and then read the result on the host, which meta
    tensors cannot give (a device check failing would raise CollectiveDeviceError instead)."""
    with pytest.raises((RuntimeError, NotImplementedError), match="meta") as e:
        call()
    assert type(e.value).__name__ != "CollectiveDeviceError", e.value


def _both_parts(rank, port, out):
    """One world for both tests (each world costs seconds of imports): what each part raised, if anything."""
    import traceback
    topo, meter = join(rank, port)
    for part in (loop_call_sites, algorithm_exchanges, ring_exchange):
        try:
            part(topo, meter)
            out[(rank, part.__name__)] = "ok"
        except BaseException:
            out[(rank, part.__name__)] = traceback.format_exc()
        dist.barrier()


@pytest.fixture(scope="module")
def outcome():
    return spawn(_both_parts)


def passed(outcome, part: str) -> None:
    for rank in (0, 1):
        if outcome[(rank, part)] != "ok":
            pytest.fail(f"rank {rank}: {outcome[(rank, part)]}", pytrace=False)


def loop_call_sites(topo, meter):
    from codist.rank.evaluation import Evaluator
    from codist.rank.train import StopFlag, job_traffic
    from codist.runtime.comm import CollectiveDeviceError
    ctx, algo = algorithm_on(topo, meter, {"name": "codistill"})
    # the check itself: a CPU tensor, one line naming the category and this file's line
    with pytest.raises(CollectiveDeviceError) as e:
        meter.all_reduce(torch.zeros(2), category="control")
    assert "\n" not in str(e.value)
    assert re.search(r"'control' all_reduce at tests/test_device_collectives\.py:\d+ got a tensor on cpu, "
                     r"but this run's collectives need the run's device meta", str(e.value)), str(e.value)
    assert calls(meter, "control") == 0   # refused before it ran or was counted

    stops_at_host_read(lambda: StopFlag().agreed(meter, ctx.device))
    assert calls(meter, "control") == 1

    evaluate = Evaluator(ctx, algo)
    ctx.workload.eval_model_sums = lambda model, x, y: {"loss_sum": 1.0, "correct": 1.0, "count": 2.0}
    stops_at_host_read(lambda: evaluate(1.0, 1))
    assert calls(meter, "eval") == 1

    stops_at_host_read(lambda: job_traffic(meter, ctx.device))
    assert calls(meter, "control") == 2


def test_the_loops_collectives_use_the_runs_device_and_a_cpu_tensor_fails_naming_its_caller(outcome):
    passed(outcome, "loop_call_sites")


ALGORITHMS = [
    # (algorithm config, what to call on the set-up algorithm, the categories it must use)
    ({"name": "codistill", "topology": "all"}, lambda a: a.exchange_checkpoints(), ["param_exchange"]),
    ({"name": "codistill", "topology": "ring"}, lambda a: a.exchange_checkpoints(), ["param_exchange"]),
    ({"name": "codistill", "topology": "all", "exchange": "predictions", "data": "same"},
     lambda a: a.exchange_predictions(torch.zeros(4, 10, device=META)), ["prediction_exchange"]),
    ({"name": "codistill", "topology": "ring", "exchange": "predictions", "data": "same"},
     lambda a: a.exchange_predictions(torch.zeros(4, 10, device=META)), ["prediction_exchange"]),
    ({"name": "model_average", "tau": 1, "average_optimizer_state": True},
     lambda a: (a.after_step(0), a.extra_eval_models()), ["model_average", "eval"]),
    ({"name": "diloco", "tau": 1}, lambda a: (a.after_step(0), a.extra_eval_models()), ["model_average", "eval"]),
    ({"name": "ensemble_compress", "tau": 1}, lambda a: a.after_step(0), ["param_exchange"]),
    ({"name": "ensemble"}, lambda a: a.extra_eval_models(), ["eval"]),
]


def algorithm_exchanges(topo, meter):
    for algorithm, call, categories in ALGORITHMS:
        ctx, algo = algorithm_on(topo, meter, algorithm)
        if algorithm["name"] == "model_average":   # momentum buffers to average, as after a first update
            for p in algo.model.parameters():
                algo.optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
        call(algo)
        assert all(calls(meter, c) > 0 for c in categories), (algorithm, dict(meter.counts))


def test_every_algorithms_exchanges_use_the_runs_device(outcome):
    passed(outcome, "algorithm_exchanges")


def ring_exchange(topo, meter):
    """`topology: ring`'s point-to-point exchange, on real CPU tensors: one batch_isend_irecv (NCCL can
    deadlock on separate isend/irecv), each side's bytes counted once, between the groups."""
    from codist.runtime.comm import CommMeter
    batches = []
    batched = dist.batch_isend_irecv
    dist.batch_isend_irecv = lambda ops: batches.append(len(ops)) or batched(ops)
    cpu = CommMeter(topo.rank, topo.model_of())
    cpu.install_hooks()
    try:
        peer = 1 - topo.rank
        recv = torch.empty(250)
        cpu.exchange(torch.full((250,), float(topo.rank)), dst=peer, recv=recv, src=peer, category="param_exchange")
    finally:
        dist.batch_isend_irecv = batched
        meter.install_hooks()
    assert batches == [2]
    assert torch.equal(recv, torch.full((250,), float(peer)))
    c = cpu.counts[("param_exchange", "between")]
    assert (c.sent, c.recv, c.calls) == (1000, 1000, 2), c


def test_the_ring_exchange_is_one_batch_and_counted_once_per_side(outcome):
    passed(outcome, "ring_exchange")
