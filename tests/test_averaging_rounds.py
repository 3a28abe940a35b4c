"""The rounds of the parameter-averaging algorithms (MA-DNN, DiLoCo) with 2 ranks per model: a model's
group agrees on its BatchNorm statistics before they leave it (each rank's follow its own batches), so
after a round every rank holds the mean over all ranks. A real forked gloo world of 2 models x 2 ranks
(diloco.py's survivor 'if not a.average_buffers': its runs elsewhere have one rank per model)."""
import pytest
import torch
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload

WORLD, MODELS = 4, 2   # ranks 0, 1 train model 0; ranks 2, 3 model 1


def _rank(rank, algorithm):
    from codist.algorithms import TrainContext, spec
    from codist.algorithms.updates import LocalUpdate
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    # the round is under test, not the update mechanics: no DeepSpeed engine in 4 forked processes
    strategy = spec(algorithm["name"]).strategy_class()
    cls = type(strategy.__name__, (strategy,), {"build_update": lambda self, model: LocalUpdate(self.cfg, model)})
    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": WORLD, "models": MODELS},
                                             "algorithm": algorithm}))
    topo = topology(MODELS)
    algo = cls(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()), build_workload(cfg.workload, cfg.seed),
                            torch.device("cpu")))
    algo.setup()
    bn = [m for m in algo.model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():   # each rank's own statistics, as after training on its own batches
        for m in bn:
            m.running_mean.fill_(rank)
            m.running_var.fill_(rank + 1)
    algo.after_step(algorithm["tau"] - 1)   # the round
    return {"mean": bn[0].running_mean[0].item(), "var": bn[0].running_var[0].item(), "layers": len(bn)}


@pytest.mark.parametrize("algorithm", [{"name": "model_average", "tau": 1}, {"name": "diloco", "tau": 1}],
                         ids=["model_average", "diloco"])
def test_a_round_averages_the_groups_statistics_then_the_models(algorithm):
    got = forked_world.run(WORLD, _rank, algorithm)
    # ranks 0..3 hold means 0..3 and variances 1..4: the group's mean first, then over the models, is the
    # mean of all four on every rank (each rank's own over the models alone would give 1 or 2)
    assert {r: (got[r]["mean"], got[r]["var"]) for r in got} == {r: (1.5, 2.5) for r in range(WORLD)}
    assert got[0]["layers"] > 0

