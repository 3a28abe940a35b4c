"""Sun et al.'s global model G (MA-DNN's parameter average, EC-DNN's output ensemble), DiLoCo's G and
Anil's ensemble are scored by model 0's ranks only, and MA-DNN and DiLoCo build their copy of G only
there: every rank would give the same row (the evaluation table is summed over ranks, then
divided), but at K = 8 models, K scorings of G are K - 1 wasted evaluations. On a real forked gloo
world of 2 models x 2 ranks (issue 29's survivors 'model_index != 0' and 'not model_index == 0' of
model_average.py and ensemble_compress.py), with the real Evaluator: the row is the average model's,
the start's or the output ensemble's, computed here from the ranks' states."""
import pytest
import torch
import torch.nn.functional as F
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload

WORLD, MODELS = 4, 2   # ranks 0, 1 train model 0; ranks 2, 3 model 1


def _cfg(algorithm: dict):
    return config.validate(deep_update(TINY, {"parallel": {"world_size": WORLD, "models": MODELS},
                                              "algorithm": algorithm}))


def _rank(rank, algorithm):
    from codist.algorithms import TrainContext, spec
    from codist.algorithms.updates import LocalUpdate
    from codist.rank.evaluation import Evaluator
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    # who builds and scores G is under test, not the update mechanics: each rank steps its own
    # optimizer (no DeepSpeed engine in 4 forked processes)
    strategy = spec(algorithm["name"]).strategy_class()
    cls = type(strategy.__name__, (strategy,), {"build_update": lambda self, model: LocalUpdate(self.cfg, model)})
    cfg = _cfg(algorithm)
    topo = topology(MODELS)
    algo = cls(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()), build_workload(cfg.workload, cfg.seed),
                            torch.device("cpu")))
    algo.setup()
    with torch.no_grad():   # two different models (the same on both ranks of a model), as after training
        g = torch.Generator().manual_seed(100 + topo.model_index)
        for p in algo.model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    if hasattr(algo, "ensemble_round"):   # EC-DNN: G becomes the ensemble of these two models
        algo.ensemble_round()
    built = getattr(algo, "_global", None) is not None
    scored = sorted(algo.eval_models())
    rows = Evaluator(algo.ctx, algo)(0.0, 0)   # the real evaluation: G's row as every rank receives it
    extra = spec(algorithm["name"]).extra_models[0]   # G, or the ensemble's "ensemble"
    return {"built": built, "scored": scored, "extra": rows[extra],
            "state": {k: v.clone() for k, v in algo.model.state_dict().items()}}


def _scores(cfg, state: dict) -> tuple[float, float]:
    """(val_loss, val_accuracy) of a model with `state` on the whole validation set, by hand."""
    w = build_workload(cfg.workload, cfg.seed)
    model = w.build_model()
    model.load_state_dict(state)
    model.eval()
    x, y = (torch.stack(t) for t in zip(*[w.val_dataset()[i] for i in range(len(w.val_dataset()))]))
    with torch.no_grad():
        logits = model(x).double()
    return float(F.cross_entropy(logits, y)), float((logits.argmax(1) == y).double().mean())


def _ensemble_scores(cfg, states: list[dict]) -> tuple[float, float]:
    """(val_loss, val_accuracy) of the mean of the models' softmax outputs, by hand."""
    w = build_workload(cfg.workload, cfg.seed)
    x, y = (torch.stack(t) for t in zip(*[w.val_dataset()[i] for i in range(len(w.val_dataset()))]))
    probs = 0
    for state in states:
        model = w.build_model()
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            probs = probs + F.softmax(model(x).double(), -1) / len(states)
    return float(F.nll_loss(probs.log(), y)), float((probs.argmax(1) == y).double().mean())


@pytest.mark.parametrize("name", ["model_average", "diloco"])
def test_a_parameter_average_G_is_built_and_scored_by_model_0s_ranks_only(name):
    algorithm = {"name": name, "tau": 1}
    got = forked_world.run(WORLD, _rank, algorithm)
    assert {r: (got[r]["built"], got[r]["scored"]) for r in got} == {
        0: (True, ["0", "G"]), 1: (True, ["0", "G"]), 2: (False, ["1"]), 3: (False, ["1"])}
    if name == "model_average":   # G: the parameter (and BatchNorm statistics) average of the two models
        a, b = got[0]["state"], got[2]["state"]
        expected = {k: (a[k] + b[k]) / 2 if a[k].is_floating_point() else a[k] for k in a}
    else:   # DiLoCo before any inner step: G is the workers' shared start, not their mean
        torch.manual_seed(_cfg(algorithm).seed * 1009)   # the shared initialisation (Algorithm.model_seed)
        expected = build_workload(_cfg(algorithm).workload, 0).build_model().state_dict()
    loss, accuracy = _scores(_cfg(algorithm), expected)
    for r in got:
        assert got[r]["extra"]["val_loss"] == pytest.approx(loss, rel=1e-5)
        assert got[r]["extra"]["val_accuracy"] == pytest.approx(accuracy)


@pytest.mark.parametrize("algorithm, row", [({"name": "ensemble_compress", "tau": 1}, "G"),   # EC-DNN
                                            ({"name": "ensemble"}, "ensemble")],              # Anil's ensemble
                         ids=["ec_dnn", "ensemble"])
def test_an_output_ensemble_is_scored_by_model_0s_ranks_only(algorithm, row):
    got = forked_world.run(WORLD, _rank, algorithm)
    assert {r: got[r]["scored"] for r in got} == {0: ["0", row], 1: ["0", row], 2: ["1"], 3: ["1"]}
    # the row on every rank: the mean of the two models' softmax outputs
    loss, accuracy = _ensemble_scores(_cfg(algorithm), [got[0]["state"], got[2]["state"]])
    for r in got:
        assert got[r]["extra"]["val_loss"] == pytest.approx(loss, rel=1e-5)
        assert got[r]["extra"]["val_accuracy"] == pytest.approx(accuracy)
