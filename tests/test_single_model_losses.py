"""The single-model baselines' losses, update by update, recomputed here in float64: Anil et al.'s
two-phase distillation (Sec. 3.4.1: CE + alpha T^2 KL(mean_j softmax(t_j / T) || softmax(f / T)),
teachers read from a finished run's saved models) and label smoothing (Fig. 2a: (1 - w) CE(y, f) +
w CE(prior, f), the prior uniform or the training set's class frequencies, counted here). One real
rank (a forked 1-rank gloo world) drives each algorithm's hooks in train_step's order; the teachers
are two differently initialised models saved as a teacher run's model_0.pt and model_1.pt."""
import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload

STEPS, TEACHER_RUN, PICKLED_CODE_RUN = 3, "abcdefabcdef", "0123456789ab"
CASES = {"distill": {"name": "distill", "teacher_run": TEACHER_RUN, "alpha": 0.6, "temperature": 2.0},
         "uniform": {"name": "label_smoothing", "prior": "uniform", "weight": 0.3},
         "unigram": {"name": "label_smoothing", "prior": "unigram", "weight": 0.3}}


def _cfg(algorithm: dict):
    return config.validate(deep_update(TINY, {"algorithm": algorithm}))


def _rank(rank, runs):
    from codist.algorithms import TrainContext, build_algorithm
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    topo, out = topology(1), {}
    for name, algorithm in CASES.items():
        cfg = _cfg(algorithm)
        algo = build_algorithm(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                            build_workload(cfg.workload, cfg.seed), torch.device("cpu"), runs / "student"))
        algo.setup()
        out[name] = forked_world.updates(algo, STEPS)
    # a teacher run without the named model, a run that does not know its own directory: one line each;
    # a teacher file that pickles a call: refused unread (weights only)
    errors = []
    for out_dir, teacher_run, models in ((runs / "student", TEACHER_RUN, ["0", "2"]), (None, TEACHER_RUN, ["0"]),
                                         (runs / "student", PICKLED_CODE_RUN, ["0"])):
        cfg = _cfg({**CASES["distill"], "teacher_run": teacher_run, "teacher_models": models})
        algo = build_algorithm(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                            build_workload(cfg.workload, cfg.seed), torch.device("cpu"), out_dir))
        try:
            algo.setup()
            errors.append(None)
        except (FileNotFoundError, RuntimeError, pickle.UnpicklingError) as e:
            errors.append(f"{type(e).__name__}: {e}")
    out["errors"] = errors
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    (runs / TEACHER_RUN).mkdir()
    w = build_workload(_cfg(CASES["distill"]).workload, 0)
    for name, seed in (("0", 11), ("1", 12)):   # two teachers, neither the student's initialisation
        torch.manual_seed(seed)
        torch.save(w.build_model().state_dict(), runs / TEACHER_RUN / f"model_{name}.pt")
    (runs / PICKLED_CODE_RUN).mkdir()
    torch.save({"fc.weight": _MakesADirectory(runs / "code_ran")}, runs / PICKLED_CODE_RUN / "model_0.pt")
    return forked_world.run(1, _rank, runs)[0], runs


class _MakesADirectory:
    """Unpickled, calls os.mkdir(path): what a teacher file from elsewhere could run if it were unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def _logits(model, state, x, train):
    model.load_state_dict(state)
    model.train(train)
    with torch.no_grad():
        return model(x).double()


def _soft_ce_and_kl(q: torch.Tensor, log_p: torch.Tensor) -> tuple[float, float]:
    return float(-(q * log_p).sum(-1).mean()), float((q * (q.log() - log_p)).sum(-1).mean())


def test_two_phase_distillation_loss_of_every_update_by_hand(world):
    got, runs = world
    a, T = CASES["distill"], CASES["distill"]["temperature"]
    net = build_workload(_cfg(a).workload, 0).build_model()
    teachers = [torch.load(runs / TEACHER_RUN / f"model_{j}.pt", weights_only=True) for j in ("0", "1")]
    for step in got["distill"]:
        z = _logits(net, step["state"], step["x"], True)   # the student trains (BatchNorm on the batch)
        q = torch.stack([F.softmax(_logits(net, t, step["x"], False) / T, -1) for t in teachers]).mean(0)
        ce = float(F.cross_entropy(z, step["y"]))
        kl = _soft_ce_and_kl(q, F.log_softmax(z / T, -1))[1] * T * T
        assert step["task"] == pytest.approx(ce, rel=1e-5)
        assert step["extra"] == pytest.approx(kl, rel=1e-4, abs=1e-6)
        assert step["loss"] == pytest.approx(ce + a["alpha"] * kl, rel=1e-5)


def test_a_missing_teacher_model_or_run_directory_is_one_clear_line_and_no_teacher_file_runs_code(world):
    got, runs = world
    missing, no_dir, pickled_code = got["errors"]
    assert missing == (f"FileNotFoundError: algorithm.teacher_run='{TEACHER_RUN}': {runs / TEACHER_RUN / 'model_2.pt'} "
                       f"does not exist; train the teacher run first, with train.save_model: true")
    assert no_dir == "RuntimeError: algorithm.name='distill' needs the run's output directory to find its teacher run"
    assert not (runs / "code_ran").exists()   # the pickled call never ran: torch refused the file unread
    assert pickled_code.startswith("UnpicklingError: Weights only load failed")


@pytest.mark.parametrize("prior", ["uniform", "unigram"])
def test_label_smoothing_loss_of_every_update_by_hand(world, prior):
    got, _ = world
    a = CASES[prior]
    w = build_workload(_cfg(a).workload, 0)
    labels = np.array([int(w.train_dataset()[i][1]) for i in range(len(w.train_dataset()))])
    q = np.full(10, 0.1) if prior == "uniform" else np.bincount(labels, minlength=10) / len(labels)
    net = w.build_model()
    for step in got[prior]:
        z = _logits(net, step["state"], step["x"], True)
        ce = float(F.cross_entropy(z, step["y"]))
        smooth = _soft_ce_and_kl(torch.tensor(q).expand_as(z), F.log_softmax(z, -1))[0]
        assert step["task"] == pytest.approx(ce, rel=1e-5)
        assert step["extra"] == pytest.approx(smooth, rel=1e-5)
        assert step["loss"] == pytest.approx((1 - a["weight"]) * ce + a["weight"] * smooth, rel=1e-5)
