"""Resume equality for every registered algorithm: a run stopped after its checkpoint at update 5
(its directory copied without the outputs written after it) and run again resumes there and ends
with the uninterrupted run's metrics rows, saved models and traffic, bit for bit.

Augmentation is on (random crops and flips from the ranks' global RNG), so a generator left
unrestored changes the batches after the resume; the exchange periods put rounds both before and
after update 5, so an algorithm's own state (EC-DNN's ensemble, DiLoCo's outer momentum, PowerSGD's
memories, post-local SGD's counters, codistillation's teachers) is used after the resume. The
workload's only dropout is fairseq's (translation); its random numbers come from the same
generator as the augmentation's.
"""
import contextlib
import shutil

import pytest
import torch
from conftest import TINY, comparable, deep_update, launch_run, read_rows, read_summary

from codist.algorithms.registry import specs

pytestmark = pytest.mark.slow
TEACHER = "7eac4e77eac4"   # the ensemble run's directory: the two-phase student's teacher run
TWO = {"parallel": {"world_size": 2, "models": 2}}
ONE_MODEL_TWO_RANKS = {"parallel": {"world_size": 2}}
CASES = {
    "allreduce": ONE_MODEL_TWO_RANKS,
    "codistill": {**TWO, "algorithm": {"name": "codistill", "exchange_every": 3, "burn_in": 1, "temperature": 2.0,
                                       "alpha_ramp_steps": 6}},
    "model_average": {**TWO, "algorithm": {"name": "model_average", "tau": 3, "average_optimizer_state": True}},
    "diloco": {**TWO, "algorithm": {"name": "diloco", "tau": 3}},
    "ensemble_compress": {**TWO, "algorithm": {"name": "ensemble_compress", "tau": 2, "temperature": 2.0}},
    "ensemble": {**TWO, "algorithm": {"name": "ensemble"}},
    "label_smoothing": {**ONE_MODEL_TWO_RANKS, "algorithm": {"name": "label_smoothing", "prior": "unigram",
                                                             "weight": 0.2}},
    "distill": {"algorithm": {"name": "distill", "teacher_run": TEACHER, "temperature": 2.0}},
    "powersgd": {**ONE_MODEL_TWO_RANKS, "algorithm": {"name": "powersgd", "start_iter": 2}},
    # tau 3: averaged at update 3 and 6, so the checkpoint after update 5 holds models that differ (a resumed
    # world-wide DDP must not broadcast one over the other)
    "post_local_sgd": {**TWO, "algorithm": {"name": "post_local_sgd", "tau": 3, "warmup_steps": 2}},
}
BASE = {"workload": {"augment": True}, "train": {"steps": 8, "eval_every": 4, "checkpoint_every": 5}}
AFTER_CHECKPOINT = ("summary.json", "metrics.jsonl", "model_*.pt", "val_predictions_*.npy")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """name -> the finished run of CASES[name] (the ensemble's in TEACHER, the student's sibling)."""
    root = tmp_path_factory.mktemp("resume")
    done = {}

    def get(name):
        if name == "distill":
            get("ensemble")
        if name not in done:
            done[name] = launch_run(root / (TEACHER if name == "ensemble" else name), deep_update(BASE, CASES[name]))
        return done[name]
    return get


def traffic(run):
    """The summary's traffic without what the restart itself adds: its barriers (control), and the
    set-up collectives of torch DDP that the meter cannot see, run again by the new processes."""
    comm = read_summary(run)["comm"]
    for category in ("control", "unseen"):
        comm["by_category"].pop(category, None)
    comm.pop("unseen_collectives_all_ranks")
    return comm


def test_every_registered_algorithm_has_a_case():
    # the built-in ones: other test modules of the same session register plugins (toy_algorithm)
    built_in = {n for n, s in specs().items() if s.config.__module__.startswith("codist.algorithms.")}
    assert set(CASES) == built_in


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_resumed_from_update_5_equals_the_uninterrupted_run(name, uninterrupted):
    ref = uninterrupted(name)
    resumed = ref.with_name(f"{name}-resumed")
    shutil.copytree(ref, resumed)
    for pattern in AFTER_CHECKPOINT:
        for path in resumed.glob(pattern):
            path.unlink()
    launch_run(resumed, deep_update(BASE, CASES[name]))
    assert read_summary(resumed)["resumed_from_step"] == 5
    assert comparable(read_rows(resumed)) == comparable(read_rows(ref))
    models = sorted(p.name for p in ref.glob("model_*.pt"))
    assert models and models == sorted(p.name for p in resumed.glob("model_*.pt"))
    for file in models:
        a, b = (torch.load(run / file, weights_only=True) for run in (ref, resumed))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), file
    assert traffic(resumed) == traffic(ref)




def _powersgd_over_buckets(rank, out):
    """torch's PowerSGD hook on a DDP of several buckets, 6 updates straight, or 3, then a new DDP
    (with the saved layout, or without) with the PowerSGD state carried over, then 3. One rank, in
    a gloo group of 3 worker threads: the hook waits inside its futures' callbacks, which gloo runs
    on those threads, and two buckets' chains can block gloo's default 2 (pytorch/pytorch#48478;
    codist's PowerSGD on gloo uses one bucket: tests/test_powersgd_gloo.py)."""
    import copy

    import torch.distributed as dist
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    from codist.algorithms.updates import bucket_layout, rebuilt_buckets
    torch.set_num_threads(1)
    options = dist.ProcessGroupGloo._Options()
    options._threads, options._devices = 3, [dist.ProcessGroupGloo.create_default_device()]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)   # a copied state's
    store = dist.HashStore()
    group = dist.ProcessGroup(store, 0, 1)
    group._set_default_backend(dist.ProcessGroup.BackendType.GLOO)
    group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO,
                            dist.ProcessGroupGloo(store, 0, 1, options))

    def ddp_of(model, buckets=None, state=None):
        with bucket_layout(buckets) if buckets else contextlib.nullcontext():
            # a second bucket: conv's 2 tensors
            ddp = DDP(model, process_group=group, bucket_cap_mb=0.004, init_sync=False)
        state = state or psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
        state.process_group = group   # a copied state names the default group
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
        return ddp, state

    def train(ddp, opt, updates):
        for i in updates:
            opt.zero_grad()
            ddp(torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(i))).pow(2).sum().backward()
            opt.step()

    result = {}
    for mode in ("straight", "saved layout", "new layout"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(288, 64), nn.Linear(64, 5))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ddp, state = ddp_of(model)
        train(ddp, opt, range(6 if mode == "straight" else 3))
        if mode != "straight":
            buckets = rebuilt_buckets(ddp)
            result["buckets"] = buckets
            ddp.reducer._remove_autograd_hooks()
            ddp, _ = ddp_of(model, buckets if mode == "saved layout" else None, copy.deepcopy(state))
            try:
                train(ddp, opt, range(3, 6))
            except RuntimeError as e:   # the memories' sizes are those of the saved layout's buckets
                result[mode] = str(e)
                continue
        result[mode] = [p.detach().clone() for p in model.parameters()]
    torch.save(result, out)
    dist.destroy_process_group()


def test_a_ddp_built_with_the_saved_bucket_layout_continues_powersgd_exactly(tmp_path):
    import torch.multiprocessing as mp
    ranks = mp.spawn(_powersgd_over_buckets, args=(tmp_path / "out.pt",), nprocs=1, join=False)
    try:
        assert ranks.join(timeout=180), "the rank did not finish in 180 s (hung in gloo?)"
    finally:
        for process in ranks.processes:
            if process.is_alive():
                process.kill()
    result = torch.load(tmp_path / "out.pt", weights_only=True)
    assert result["buckets"] == [[5, 4, 3, 2], [0, 1]]   # gradient-ready order, conv's weight and bias apart
    assert not isinstance(result["saved layout"], str), result["saved layout"]
    assert all(torch.equal(a, b) for a, b in zip(result["straight"], result["saved layout"]))
    assert "must match the size" in result["new layout"]   # as a restart without the layout did


# the LM carries hidden state from batch to batch as module extra state, and each rank of a group its own
# (its own slice of the stream): the group's file has rank 0's, each rank's file its own
LM_GROUP_OF_TWO = {**deep_update(TINY, {**ONE_MODEL_TWO_RANKS, "train": BASE["train"],
                                         "optimizer": {"name": "adam", "lr": 0.003, "weight_decay": 0.0}}),
                   "workload": {"name": "lm", "val_tokens": 4096}}


def test_an_lm_group_of_two_ranks_resumes_each_ranks_own_hidden_state(tmp_path):
    ref = launch_run(tmp_path / "ref", {}, base=LM_GROUP_OF_TWO)
    resumed = tmp_path / "resumed"
    shutil.copytree(ref, resumed)
    for pattern in AFTER_CHECKPOINT:
        for path in resumed.glob(pattern):
            path.unlink()
    launch_run(resumed, {}, base=LM_GROUP_OF_TWO)
    assert read_summary(resumed)["resumed_from_step"] == 5
    assert comparable(read_rows(resumed)) == comparable(read_rows(ref))
    a, b = (torch.load(run / "model_0.pt", weights_only=True) for run in (ref, resumed))
    torch.testing.assert_close(a, b, rtol=0, atol=0)   # the weights and the saved hidden state, bit for bit
