"""BatchNorm running statistics in a model group of several ranks (issue 28): the engine all-reduces
gradients, not buffers, so each rank's statistics follow its own batches. The group averages them
(counters kept) before the model's state leaves it (an exchange, a saved model), and each rank
checkpoints its own, so a resumed run continues exactly."""
import json
import shutil

import pytest
import torch
import torch.multiprocessing as mp
from conftest import TINY, comparable, deep_update, launch_run, read_rows

from codist import config
from codist.launching import launch


def _bn(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]


def four_rank_codistillation(rank, port):
    """This rank's codistill algorithm, set up, in a gloo world of 4 forked ranks: models 0 and 1 of 2
    ranks each (ranks 0, 1 and 2, 3), with (topology, meter); shared with test_norm_stats_lending."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    from codist.algorithms import TrainContext, base, build_algorithm
    from codist.algorithms.updates import LocalUpdate
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    from codist.workloads import build_workload
    # the exchange, not the update mechanics, is under test: no DeepSpeed engine in 4 processes
    base.Algorithm.build_update = lambda self, model: LocalUpdate(self.cfg, model)
    cfg = config.validate(deep_update(TINY, {"parallel": {"world_size": 4, "models": 2},
                                             "algorithm": {"name": "codistill", "exchange_every": 1}}))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4)
    topo = topology(2)   # the run's groups, without DeepSpeed's start-up in 4 processes
    meter = CommMeter(rank, topo.model_of())
    meter.install_hooks()
    algo = build_algorithm(TrainContext(cfg, topo, meter, build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
    algo.setup()
    return algo, topo, meter


def _ranks(rank, port, out):
    algo, topo, meter = four_rank_codistillation(rank, port)
    with torch.no_grad():   # each rank's own statistics, as after training on its own batches
        for m in _bn(algo.model):
            m.running_mean.fill_(rank)
            m.running_var.fill_(rank + 1)
            m.num_batches_tracked.fill_(10 * rank)
    algo.exchange_checkpoints()
    mine, teacher = _bn(algo.model)[0], _bn(algo.teachers[1 - topo.model_index])[0]
    out[rank] = (mine.running_mean[0].item(), mine.running_var[0].item(), mine.num_batches_tracked.item(),
                 teacher.running_mean[0].item(), meter.counts[("param_exchange", "within")].calls)


@pytest.mark.slow   # 4 processes: about 30 s of CPU
def test_a_group_agrees_on_its_statistics_before_they_leave_it():
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_ranks, args=(launch.free_port(), out), nprocs=4)
        got = dict(out)
    # ranks 0, 1 train model 0 and ranks 2, 3 model 1: each group's mean, each rank's own counter,
    # the teacher (the other model) with that group's mean; one within-group all-reduce per rank
    assert got == {0: (0.5, 1.5, 0, 2.5, 1), 1: (0.5, 1.5, 10, 2.5, 1),
                   2: (2.5, 3.5, 20, 0.5, 1), 3: (2.5, 3.5, 30, 0.5, 1)}


RUN = deep_update(TINY, {"parallel": {"world_size": 2},   # one model on 2 ranks: a DeepSpeed engine
                         "train": {"steps": 12, "eval_every": 4, "checkpoint_every": 8}})


def test_a_resumed_group_continues_with_each_ranks_own_statistics(tmp_path):
    """Evaluation is sharded over the group's ranks, each with its own statistics: a rank that resumed
    with its group's first rank's would score its shard differently."""
    ref = launch_run(tmp_path / "ref", RUN, base={})
    resumed = tmp_path / "resumed"
    shutil.copytree(ref, resumed)
    (resumed / "summary.json").unlink()
    assert launch.run(config.validate(RUN), resumed) == 0
    assert json.loads((resumed / "summary.json").read_text())["resumed_from_step"] == 8
    assert comparable(read_rows(resumed)) == \
        comparable(read_rows(ref))
