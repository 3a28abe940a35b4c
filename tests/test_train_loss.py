"""`train_loss` is the task loss only: with codistillation at alpha > 0 the value an update
reports equals the cross-entropy of the model on that batch, and the distillation term is kept
apart (`distill_loss`), so switching distillation on at burn-in is no jump in the training loss.
Two ranks, Codistill driven step by step inside real processes."""
import copy

import pytest
import torch

from codistill_ranks import spawn, start

pytestmark = pytest.mark.slow
STEPS, BURN_IN, ALPHA = 4, 1, 5.0


def _worker(rank, port, out):
    workload, algo, stream = start(rank, port, {"exchange_every": 1, "burn_in": BURN_IN, "alpha": ALPHA,
                                                "data": "disjoint"}, stream_rank=rank)
    rows = []
    for step in range(STEPS):
        x, y = stream.batch(step)
        with torch.no_grad():   # the task loss of the model as it is before the update, on a copy
            task = workload.loss(workload.forward(copy.deepcopy(algo.model).train(), x), y).item()
        reported = algo.train_step(step, (x, y)).item()   # a tensor on the device: read once per interval
        rows.append((task, reported, None if algo.last_distill is None else algo.last_distill.item()))
    out[rank] = rows
    torch.distributed.destroy_process_group()


def test_train_loss_is_the_task_loss_and_the_distillation_term_is_apart():
    res = spawn(_worker)
    for rank in (0, 1):
        for step, (task, reported, distill) in enumerate(res[rank]):
            assert reported == pytest.approx(task, rel=1e-5)
            if step < BURN_IN:
                assert distill is None
            else:   # the models differ (disjoint data), so the term is positive and not in train_loss
                assert distill is not None and distill > 0
