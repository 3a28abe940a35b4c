"""A model trained by two ranks is evaluated as it is saved (issue 42 s.1): its ranks' BatchNorm
running statistics follow their own batches and differ, and the saved file holds the group's
(the mean on a DeepSpeed engine group, the first rank's on a DDP group). Each run's last metrics
row must equal its saved model_0.pt scored alone, here, on the whole validation set; before the fix
each rank scored its half of the set with its own statistics. The ranks' statistics are checked to
differ (or the test would show nothing), and training after an evaluation is checked unchanged:
the run's own statistics are lent back (a run evaluated at every step ends where one evaluated only
at the end does)."""
import pytest
import torch
from conftest import TINY, deep_update, launch_run, read_rows

from codist import config
from codist.workloads import build_workload

RUN = {"parallel": {"world_size": 2}, "train": {"save_model": True, "checkpoint_every": 3}}
ALGORITHMS = {"allreduce": {"name": "allreduce"}, "powersgd": {"name": "powersgd", "start_iter": 2}}


def scored_alone(run, extra) -> tuple[float, float]:
    """(val_loss, val_accuracy) of the run's saved model_0.pt on the whole validation set, in one process."""
    w = build_workload(config.validate(deep_update(TINY, extra)).workload, 0)
    model = w.build_model()
    model.load_state_dict(torch.load(run / "model_0.pt", weights_only=True))
    model.eval()
    x, y = (torch.stack(t) for t in zip(*[w.val_dataset()[i] for i in range(len(w.val_dataset()))]))
    with torch.no_grad():
        z = model(x).double()
    return float(torch.nn.functional.cross_entropy(z, y)), float((z.argmax(1) == y).double().mean())


def rank_statistics(run, step) -> list[torch.Tensor]:
    """Each rank's own running means and variances, flat, from its checkpoint file at `step`."""
    return [torch.cat([t.reshape(-1) for t in torch.load(run / "checkpoint" / f"step-{step}" / f"rank-{r}.pt",
                                                           weights_only=True)["algorithm"]["norm_statistics"]])
            for r in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_the_last_row_is_the_saved_model_scored_alone(tmp_path, name):
    extra = deep_update(RUN, {"algorithm": ALGORITHMS[name]})
    run = launch_run(tmp_path / name, extra)
    steps = TINY["train"]["steps"]
    own = rank_statistics(run, 3)   # the newest checkpoint (none is written at the last update)
    assert not torch.equal(own[0], own[1])   # the ranks' statistics differ: the case at issue
    last = [r for r in read_rows(run) if r["step"] == steps and r["model"] == "0"][0]
    loss, accuracy = scored_alone(run, extra)
    assert last["val_loss"] == pytest.approx(loss, rel=1e-6, abs=1e-9)
    assert last["val_accuracy"] == pytest.approx(accuracy, abs=1e-9)


@pytest.mark.slow
def test_an_evaluation_leaves_each_ranks_own_statistics_to_train_on(tmp_path):
    """Evaluating after every update or only at the end: the same statistics on every rank at the
    checkpoint after update 3, the same saved model, the same last row (the evaluation lent the group's statistics and gave
    each rank its own back)."""
    ends = {}
    for every in (1, TINY["train"]["steps"]):
        extra = deep_update(RUN, {"algorithm": ALGORITHMS["allreduce"], "train": {"eval_every": every}})
        run = launch_run(tmp_path / f"every{every}", extra)
        last = [r for r in read_rows(run) if r["step"] == TINY["train"]["steps"]][0]
        ends[every] = (rank_statistics(run, 3),
                       torch.load(run / "model_0.pt", weights_only=True), last["val_loss"])
    (stats1, model1, loss1), (stats6, model6, loss6) = ends.values()
    assert all(torch.equal(a, b) for a, b in zip(stats1, stats6))
    assert model1.keys() == model6.keys() and all(torch.equal(model1[k], model6[k]) for k in model1)
    assert loss1 == loss6
