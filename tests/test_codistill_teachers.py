"""Teachers are really stale: between exchanges a teacher copy does not change; right after an
exchange it equals the other model's parameters at that moment. Two ranks, Codistill driven
step by step inside real processes."""
import pytest
import torch

from codistill_ranks import spawn, start

pytestmark = pytest.mark.slow
STEPS, K, BURN_IN = 7, 3, 1


def _worker(rank, port, out):
    from codist.algorithms.state import flat_state
    workload, algo, stream = start(rank, port, {"exchange_every": K, "burn_in": BURN_IN, "data": "same"})
    other = 1 - rank
    own_before, teacher_after = [], []
    for step in range(STEPS):
        own_before.append(flat_state(algo.model).clone())
        algo.train_step(step, stream.batch(step))
        teacher_after.append(flat_state(algo.teachers[other]).clone())
    out[rank] = (own_before, teacher_after, algo.exchanges)
    torch.distributed.destroy_process_group()


def test_teacher_is_a_stale_copy_refreshed_every_k_steps():
    res = spawn(_worker)
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
