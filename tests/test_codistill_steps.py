"""Codistillation's loss, update by update, at Anil's and Sodhani's settings other than the default:
3 models x 2 ranks, both topologies (all others, the previous model), both exchanges (stale
checkpoints every k updates, current predictions every update), burn-in, an alpha ramp, T != 1.
A real forked gloo world of 6 ranks drives Codistill's hooks in train_step's order; every update's
loss (CE + alpha_t T^2 KL(mean_j softmax(f_j / T) || softmax(f_i / T))) is recomputed here in float64
from the states the ranks recorded: the teachers rebuilt from the states their source ranks held at
the last exchange (checkpoint) or at this update (predictions), alpha_t from the ramp written out.

Each rank of a model steps its own optimizer (no DeepSpeed engine in 6 forked processes), so the two
ranks of a model drift apart: a teacher taken from the wrong rank of its model would show."""
import pytest
import torch
import torch.nn.functional as F
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload

MODELS, RANKS, STEPS = 3, 2, 6   # rank = model x RANKS + position in the model's group
CASES = {   # k, burn-in, ramp and T chosen so that the exchange steps and the ramp's end differ by case
    "all_checkpoint": {"topology": "all", "exchange": "checkpoint", "exchange_every": 2, "burn_in": 1,
                       "alpha": 0.8, "alpha_ramp_steps": 2, "temperature": 2.0, "data": "disjoint"},
    "ring_checkpoint": {"topology": "ring", "exchange": "checkpoint", "exchange_every": 3, "burn_in": 2,
                        "alpha": 1.5, "temperature": 3.0, "data": "disjoint"},
    "all_predictions": {"topology": "all", "exchange": "predictions", "burn_in": 1, "alpha": 0.5,
                        "temperature": 2.0, "data": "same"},
    "ring_predictions": {"topology": "ring", "exchange": "predictions", "burn_in": 0, "alpha": 1.0,
                         "alpha_ramp_steps": 3, "temperature": 1.5, "data": "same"},
}


def _cfg(algorithm: dict):
    return config.validate(deep_update(TINY, {"parallel": {"world_size": MODELS * RANKS, "models": MODELS},
                                              "workload": {"norm": "none"},   # eval = train mode: teachers exact
                                              "algorithm": {"name": "codistill", **algorithm}}))


def _rank(rank):
    from codist.algorithms import TrainContext
    from codist.algorithms.codistill import Codistill
    from codist.algorithms.updates import LocalUpdate
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology

    class LocalCodistill(Codistill):
        def build_update(self, model):
            return LocalUpdate(self.cfg, model)
    topo = topology(MODELS)
    out = {}
    for name, algorithm in CASES.items():
        cfg = _cfg(algorithm)
        algo = LocalCodistill(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                           build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
        algo.setup()
        steps = forked_world.updates(algo, STEPS)
        # what a checkpoint carries, loaded into a fresh Codistill: the exchange count and the stale teachers
        # (which differ from a fresh set-up's teachers: the round trip is no no-op)
        again = LocalCodistill(algo.ctx)
        again.setup()
        fresh = [t.state_dict()["fc.weight"].clone() for t in again.teachers.values()]
        again.load_checkpoint_state(algo.checkpoint_state())
        teachers = [(again.teachers[j].state_dict(), algo.teachers[j].state_dict()) for j in algo.teachers]
        out[name] = {"steps": steps, "exchanges": algo.exchanges, "teacher_ids": algo.teacher_ids,
                     "copies": sorted(algo.teachers), "restored": again.exchanges == algo.exchanges and all(
                         torch.equal(a[key], b[key]) for a, b in teachers for key in b),
                     "fresh_differs": all(not torch.equal(f, a["fc.weight"]) for f, (a, _) in zip(fresh, teachers))}
    return out


@pytest.fixture(scope="module")
def world():
    return forked_world.run(MODELS * RANKS, _rank)


def _logits(model, state, x):
    """The model's logits with `state` (as the run computes them, in float32), in float64."""
    model.load_state_dict(state)
    with torch.no_grad():
        return model(x).double()


def _alpha(a: dict, step: int) -> float:
    ramp = a.get("alpha_ramp_steps", 0)
    return a["alpha"] * (min(1.0, (step - a["burn_in"] + 1) / ramp) if ramp else 1.0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_codistill_loss_of_every_update_by_hand(world, case):
    a = CASES[case]
    net, T, k = build_workload(_cfg(a).workload, 0).build_model(), a["temperature"], a.get("exchange_every")
    for rank in range(MODELS * RANKS):
        model, position = divmod(rank, RANKS)
        teachers = [j for j in range(MODELS) if j != model] if a["topology"] == "all" else [(model - 1) % MODELS]
        assert world[rank][case]["teacher_ids"] == teachers
        exchanges = len(range(a["burn_in"], STEPS, k)) if a["exchange"] == "checkpoint" else 0
        assert world[rank][case]["exchanges"] == exchanges
        # checkpoint: a local copy per teacher, restored from a checkpoint; predictions: no copies
        assert world[rank][case]["copies"] == (teachers if a["exchange"] == "checkpoint" else [])
        assert world[rank][case]["restored"] and world[rank][case]["fresh_differs"]
        for step, got in enumerate(world[rank][case]["steps"]):
            z = _logits(net, got["state"], got["x"])
            ce = float(F.cross_entropy(z, got["y"]))
            assert got["task"] == pytest.approx(ce, rel=1e-5)
            if step < a["burn_in"]:
                assert got["extra"] is None and got["loss"] == got["task"]
                continue
            # the teacher of model j: the rank at this rank's position in j's group, as it was at the
            # last exchange (checkpoint: every k updates from burn-in) or now (predictions)
            at = a["burn_in"] + (step - a["burn_in"]) // k * k if a["exchange"] == "checkpoint" else step
            source = [world[j * RANKS + position][case]["steps"][at] for j in teachers]
            if a["exchange"] == "predictions":   # a shared batch: the teachers' outputs on it
                assert all(torch.equal(s["x"], got["x"]) for s in source)
            q = torch.stack([F.softmax(_logits(net, s["state"], got["x"]) / T, -1) for s in source]).mean(0)
            d = float((q * (q.log() - F.log_softmax(z / T, -1))).sum(-1).mean()) * T * T
            assert got["extra"] == pytest.approx(d, rel=1e-4, abs=1e-6)
            assert got["loss"] == pytest.approx(ce + _alpha(a, step) * d, rel=1e-5)
