"""DiLoCo: the outer step against a reference computed by hand (and torch's own Nesterov SGD),
and, in real runs, outer lr 1 / momentum 0 giving model_average's metrics rows exactly."""
import pytest
import torch
from conftest import TINY, comparable, deep_update, launch_run, read_rows, read_summary

from codist import config
from codist.algorithms.diloco import outer_step

START = torch.tensor([1.0, 2.0])
MEAN = torch.tensor([1.0, 1.75])      # workers [0.5, 2.5] and [1.5, 1.0]: delta = [0, 0.25]


def test_one_outer_step_by_hand():
    b = torch.zeros(2)   # Nesterov, lr 0.5, mu 0.5: b = delta; step = delta + 0.5 b = [0, 0.375]
    assert torch.equal(outer_step(START, MEAN, b, 0.5, 0.5, True), torch.tensor([1.0, 1.8125]))
    assert torch.equal(b, torch.tensor([0.0, 0.25]))
    # second round from [1, 1.8125], mean [0.75, 1.8125]: delta = [0.25, 0], b = [0.25, 0.125],
    # step = [0.375, 0.0625], theta = [0.8125, 1.78125]
    new = outer_step(torch.tensor([1.0, 1.8125]), torch.tensor([0.75, 1.8125]), b, 0.5, 0.5, True)
    assert torch.equal(new, torch.tensor([0.8125, 1.78125])) and torch.equal(b, torch.tensor([0.25, 0.125]))
    b = torch.zeros(2)   # plain momentum: step = b = delta
    assert torch.equal(outer_step(START, MEAN, b, 0.5, 0.5, False), torch.tensor([1.0, 1.875]))
    # lr 1, mu 0: the mean itself, bit for bit
    assert torch.equal(outer_step(START, MEAN, torch.zeros(2), 1.0, 0.0, False), MEAN)


@pytest.mark.parametrize("lr", [0.7, 2.0])   # the paper's; above 1 (the config allows any lr > 0)
@pytest.mark.parametrize("nesterov", [True, False])
def test_outer_steps_match_torch_sgd(nesterov, lr):
    gen = torch.Generator().manual_seed(0)
    theta = torch.randn(50, generator=gen, dtype=torch.float64)
    p = torch.nn.Parameter(theta.clone())
    sgd = torch.optim.SGD([p], lr=lr, momentum=0.9, nesterov=nesterov)
    b = torch.zeros_like(theta)
    for _ in range(4):
        mean = theta + 0.1 * torch.randn(50, generator=gen, dtype=torch.float64)
        p.grad = (p.detach() - mean).clone()   # the pseudo-gradient
        sgd.step()
        theta = outer_step(theta, mean, b, lr, 0.9, nesterov)
        assert torch.allclose(theta, p.detach(), rtol=0, atol=1e-12)


def test_config_keys_and_capabilities():
    cfg = config.validate({"parallel": {"world_size": 2, "models": 2}, "algorithm": {"name": "diloco", "tau": 8}})
    a = cfg.algorithm
    assert (a.tau, a.outer_lr, a.outer_momentum, a.outer_nesterov, a.model_data()) == (8, 0.7, 0.9, True, "disjoint")
    with pytest.raises(config.ConfigError, match="diloco needs at least 2 models"):
        config.validate({"algorithm": {"name": "diloco"}})


TWO = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2}, "train": {"steps": 6, "eval_every": 2}})


@pytest.mark.slow
def test_outer_lr_one_momentum_zero_is_model_averaging(tmp_path):
    ma = launch_run(tmp_path / "ma", deep_update(TWO, {"algorithm": {"name": "model_average", "tau": 3}}))
    dl = launch_run(tmp_path / "dl", deep_update(TWO, {"algorithm": {"name": "diloco", "tau": 3, "outer_lr": 1.0,
                                                                     "outer_momentum": 0.0}}))
    rows = comparable(read_rows(dl))
    assert {r["model"] for r in rows} == {"0", "1", "G"}
    assert rows == comparable(read_rows(ma))
    assert read_summary(dl)["comm"]["by_category"] == read_summary(ma)["comm"]["by_category"]
    # the paper's outer step (lr 0.7, Nesterov 0.9) is another run: same traffic, other models
    paper = launch_run(tmp_path / "paper", deep_update(TWO, {"algorithm": {"name": "diloco", "tau": 3}}))
    after = [r for r in comparable(read_rows(paper)) if r["step"] == 4]
    assert after != [r for r in rows if r["step"] == 4]
    assert read_summary(paper)["comm"]["by_category"]["model_average"] == \
        read_summary(ma)["comm"]["by_category"]["model_average"]
    # at the end of an outer round (update 6) G is the shared model every worker holds
    last = {r["model"]: r for r in read_rows(paper) if r["step"] == 6}
    assert last["G"]["val_loss"] == last["0"]["val_loss"]
    mid = {r["model"]: r for r in read_rows(paper) if r["step"] == 4}   # mid-round: the next outer step's model
    assert mid["G"]["val_loss"] not in (mid["0"]["val_loss"], mid["1"]["val_loss"])


@pytest.mark.slow
def test_a_resumed_run_continues_the_outer_momentum_exactly(tmp_path):
    """Checkpoints hold the shared start and the outer momentum: resuming from update 8 (outer
    steps at 3, 6, 9) gives the uninterrupted run's rows and models."""
    import shutil
    cfg = deep_update(TWO, {"algorithm": {"name": "diloco", "tau": 3},
                            "train": {"steps": 10, "eval_every": 5, "checkpoint_every": 4}})
    ref = launch_run(tmp_path / "ref", cfg)
    resumed = tmp_path / "resumed"
    shutil.copytree(ref, resumed)
    for name in ("summary.json", "metrics.jsonl", "model_0.pt", "model_1.pt", "model_G.pt"):
        (resumed / name).unlink(missing_ok=True)   # a run stopped after its last checkpoint
    launch_run(resumed, cfg)
    assert read_summary(resumed)["resumed_from_step"] == 8
    assert comparable(read_rows(resumed)) == comparable(read_rows(ref))
    for name in ("0", "1", "G"):
        a = torch.load(ref / f"model_{name}.pt", weights_only=True)
        b = torch.load(resumed / f"model_{name}.pt", weights_only=True)
        assert all(torch.equal(a[k], b[k]) for k in a)
