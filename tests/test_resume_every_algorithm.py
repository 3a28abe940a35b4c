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
import shutil

import pytest
import torch
from conftest import deep_update, launch_run, read_rows, read_summary

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
    "post_local_sgd": {**TWO, "algorithm": {"name": "post_local_sgd", "tau": 2, "warmup_steps": 2}},
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


def comparable(rows):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


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


