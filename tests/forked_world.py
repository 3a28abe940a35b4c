"""A real gloo world of ranks forked from the test process, for tests that drive algorithm objects
directly (tests/test_global_model_ranks.py, test_ec_dnn_lm.py, test_codistill_steps.py,
test_single_model_losses.py): forked, the ranks need only what the test process imported; a
collective a rank never joins fails after 20 s, not gloo's 30 minutes. `updates` drives an
algorithm through its hooks, recording what each update's loss was computed from."""
import datetime
import os
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codist.launching.launch import free_port


def _rank(rank, world, port, worker, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=20))
        out[rank] = ("ok", worker(rank, *args))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        out[rank] = ("failed", traceback.format_exc())


def run(world: int, worker, *args) -> dict:
    """{rank: worker(rank, *args)} of a `world`-rank gloo world; a rank's exception fails the test."""
    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_rank, args=(world, free_port(), worker, args, out), nprocs=world, start_method="fork")
        got = dict(out)
    for rank, (status, value) in sorted(got.items()):
        if status == "failed":
            pytest.fail(f"rank {rank}: {value}", pytrace=False)
    return {rank: value for rank, (_, value) in got.items()}


def updates(algo, steps: int) -> list[dict]:
    """Updates 0..steps-1 of a set-up algorithm in Algorithm.train_step's order, the loss itself kept:
    per update the model's state after before_step (an exchange), the batch, the loss and its parts."""
    stream, out = algo.train_stream(), []
    for step in range(steps):
        x, y = stream.batch(step)
        algo.before_step(step, x, y)
        state = {k: v.clone() for k, v in algo.model.state_dict().items()}
        loss = algo.loss(step, x, y, algo.forward(algo.update.forward_module, x))
        out.append({"state": state, "x": x, "y": y, "loss": float(loss.detach()), "task": float(algo.last_task),
                    "extra": None if algo.last_extra is None else float(algo.last_extra)})
        algo.update.apply(loss)
        algo.after_step(step)
    return out
