"""Learning-rate and weight-decay schedule (codist.runtime.optim): exact values per update, and resume."""
import pytest
import torch

from codist.config import ConfigError, OptimizerConfig, ScheduleConfig, validate
from codist.runtime.optim import build_optimizer, build_scheduler, lr_factor, weight_decay_at


def sgd(wd=1e-4):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1, weight_decay=wd)


def test_weight_decay_at_uses_the_latest_change():
    changes = {30: 1e-5, 60: 0.0}
    assert [weight_decay_at(s, 1e-4, changes) for s in (0, 29, 30, 59, 60, 99)] == \
        [1e-4, 1e-4, 1e-5, 1e-5, 0.0, 0.0]


def test_schedule_sets_weight_decay_of_the_next_update():
    cfg = ScheduleConfig(name="step", milestones=[3, 6], weight_decay_changes={3: 1e-5, 6: 0.0})
    opt = sgd()
    sched = build_scheduler(opt, cfg, total_steps=10)
    seen = []
    for _ in range(8):          # what update k runs with, as the engine steps after each update
        seen.append((opt.param_groups[0]["lr"], opt.param_groups[0]["weight_decay"]))
        opt.step()
        sched.step()
    assert [wd for _, wd in seen] == [1e-4] * 3 + [1e-5] * 3 + [0.0] * 2
    assert [round(lr, 6) for lr, _ in seen] == [0.1] * 3 + [0.01] * 3 + [0.001] * 2


def test_schedule_resumes_from_its_state_dict():
    cfg = ScheduleConfig(name="step", milestones=[3], weight_decay_changes={3: 0.0})
    opt, opt2 = sgd(), sgd()
    sched = build_scheduler(opt, cfg, 10)
    for _ in range(4):
        opt.step()
        sched.step()
    sched2 = build_scheduler(opt2, cfg, 10)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    sched.step()
    sched2.step()
    assert opt2.param_groups[0]["weight_decay"] == opt.param_groups[0]["weight_decay"] == 0.0
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_without_changes_weight_decay_is_untouched():
    opt = sgd(5e-4)
    sched = build_scheduler(opt, ScheduleConfig(name="cosine"), 10)
    for _ in range(5):
        sched.step()
    assert opt.param_groups[0]["weight_decay"] == 5e-4
    assert lr_factor(0, ScheduleConfig(name="cosine"), 10) == 1.0


def lrs_seen(cfg: ScheduleConfig, total: int) -> list[float]:
    """The lr each update runs with, as the engine steps the scheduler after each update."""
    opt = sgd()
    sched = build_scheduler(opt, cfg, total_steps=total)
    seen = []
    for _ in range(total):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return seen


def test_linear_warmup_then_cosine_to_the_last_update():
    """Warmup 3 of 11 updates: lr x 1/3, 2/3, 1; then cosine over the 8 remaining updates,
    0.5 (1 + cos(pi k / 8)) at k = 0..7: 1 at k 0, 1/2 + sqrt(2)/4 at k 2, 1/2 at k 4, 1/2 - sqrt(2)/4
    at k 6, (1 + cos(7 pi / 8)) / 2 = (1 - cos(pi / 8)) / 2 at the last; cos(pi / 8) = sqrt(2 + sqrt 2) / 2."""
    seen = lrs_seen(ScheduleConfig(name="cosine", warmup_steps=3), 11)
    r2 = 2 ** 0.5
    cos_pi_8 = (2 + r2) ** 0.5 / 2
    expected = {0: 0.1 / 3, 1: 0.2 / 3, 2: 0.1, 3: 0.1, 4: 0.1 * (1 + cos_pi_8) / 2, 5: 0.1 * (0.5 + r2 / 4),
                7: 0.05, 9: 0.1 * (0.5 - r2 / 4), 10: 0.1 * (1 - cos_pi_8) / 2}
    for k, lr in expected.items():
        assert seen[k] == pytest.approx(lr, rel=1e-12), k
    assert all(a > b for a, b in zip(seen[3:], seen[4:]))          # falls at every update after warmup


def test_warmup_then_steps_at_the_milestones():
    seen = lrs_seen(ScheduleConfig(name="step", warmup_steps=2, milestones=[4, 6], gamma=0.5), 8)
    assert seen == pytest.approx([0.05, 0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025], rel=1e-12)
    assert lrs_seen(ScheduleConfig(name="constant", warmup_steps=4), 5) == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1])


def test_negative_weight_decay_change_is_rejected():
    with pytest.raises(ConfigError, match="weight_decay_changes"):
        validate({"schedule": {"weight_decay_changes": {5: -1.0}}}, source="x.yaml")


def test_cosine_reaches_zero_after_the_last_update():
    # warmup 3 of 4 updates: one cosine update (k = 0, factor 1); after it (k = 1 of a span of 1) the factor is 0
    cfg = ScheduleConfig(name="cosine", warmup_steps=3)
    assert [lr_factor(s, cfg, 4) for s in range(5)] == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0, 0.0], abs=1e-15)
    # all updates in warmup: the scheduler's step after the last update still has a span of 1
    assert lrs_seen(ScheduleConfig(name="cosine", warmup_steps=4), 4) == pytest.approx([0.025, 0.05, 0.075, 0.1])


@pytest.mark.parametrize("name, cls, hyper", [
    ("sgd", torch.optim.SGD, {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-3}),
    ("adam", torch.optim.Adam, {"lr": 0.05, "betas": (0.8, 0.99), "weight_decay": 1e-3}),
    ("adagrad", torch.optim.Adagrad, {"lr": 0.05, "weight_decay": 1e-3}),
])
def test_build_optimizer_passes_the_configs_hyperparameters(name, cls, hyper):
    cfg = OptimizerConfig(name=name, lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-3, betas=(0.8, 0.99))
    opt = build_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg)
    assert type(opt) is cls
    assert {k: opt.param_groups[0][k] for k in hyper} == hyper
