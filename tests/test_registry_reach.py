"""What the analysis and the budget read about an algorithm comes from its registration (issue 25
item 3): the exchange period's field (a plugin's `every` as well as the built-ins' `tau` /
`exchange_every`), the extra forward passes per update the budget charges, and its label, knob and
communication form (the byte identities, the frontier's labels and projected times, the tables)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Literal

import pytest
from conftest import TINY, deep_update
from pydantic import StrictInt

from analysis import comm_identity, frontier_walltime, plot_table, regime
from codist import budget, config
from codist.algorithms.registry import CommForm, register
from codist.algorithms.sections import AlgorithmSection
from workflows import frontier_plan

PERIOD_FRACTION = SimpleNamespace(quantity="period_fraction")
ROUNDS = SimpleNamespace(quantity="rounds")


def resolved(**sections) -> dict:
    return config.to_dict(config.validate(deep_update(TINY, sections)))


def test_a_plugin_algorithms_period_reaches_the_regime_checks():
    import toy_algorithm  # noqa: F401  (registers toy_broadcast, period="every")
    cfg = resolved(algorithm={"name": "toy_broadcast", "every": 3}, parallel={"models": 2, "world_size": 2})
    assert regime.design_value(PERIOD_FRACTION, cfg) == 3 / TINY["train"]["steps"]   # was RegimeError
    assert regime.design_value(ROUNDS, cfg) == TINY["train"]["steps"] / 3
    assert budget.extra_forwards(config.validate(deep_update(TINY, {
        "algorithm": {"name": "toy_broadcast", "every": 3}, "parallel": {"models": 2, "world_size": 2}}))) == 0.0


def test_builtin_periods_and_a_missing_one():
    cfg = resolved(algorithm={"name": "model_average", "tau": 2}, parallel={"models": 2, "world_size": 2})
    assert regime.design_value(PERIOD_FRACTION, cfg) == 2 / TINY["train"]["steps"]
    cfg = resolved(algorithm={"name": "codistill", "exchange_every": 3}, parallel={"models": 2, "world_size": 2})
    assert regime.design_value(ROUNDS, cfg) == TINY["train"]["steps"] / 3
    with pytest.raises(regime.RegimeError, match="'allreduce' has no exchange period .*no period field"):
        regime.design_value(PERIOD_FRACTION, resolved())
    with pytest.raises(regime.RegimeError, match="'nobody' is not registered"):
        regime.design_value(PERIOD_FRACTION, {**resolved(), "algorithm": {"name": "nobody"}})


def test_the_budgets_extra_forwards_come_from_the_registrations():
    def cfg(algorithm, models=2, steps=100):
        return config.validate(deep_update(TINY, {"algorithm": algorithm, "train": {"steps": steps},
                                                  "parallel": {"models": models, "world_size": models}}))
    # codistill, checkpoint exchange: (models - 1) teachers after burn-in, over the run
    assert budget.extra_forwards(cfg({"name": "codistill", "exchange": "checkpoint", "topology": "all",
                                      "burn_in": 20, "exchange_every": 10}, models=4)) == pytest.approx(3 * 80 / 100)
    assert budget.extra_forwards(cfg({"name": "codistill", "exchange": "checkpoint", "topology": "ring",
                                      "burn_in": 20, "exchange_every": 10}, models=4)) == pytest.approx(80 / 100)
    # EC-DNN with compression: the K members after the first round
    assert budget.extra_forwards(cfg({"name": "ensemble_compress", "compress": True, "tau": 25})) == pytest.approx(1.5)
    assert budget.extra_forwards(cfg({"name": "ensemble_compress", "compress": False, "tau": 25})) == 0.0
    assert budget.extra_forwards(cfg({"name": "allreduce"}, models=1)) == 0.0


class RelayConfig(AlgorithmSection):
    name: Literal["relay_reach"] = "relay_reach"
    hop: StrictInt = 4


def test_a_registered_comm_form_label_and_knob_reach_the_analysis():
    # registered here only (never trained): every `hop` updates each rank sends 3 x its state per other model
    register("relay_reach", RelayConfig, "tests.none:Relay", min_models=2, period="hop", label="relay",
             knob=("h", "hop"), comm=CommForm("ensemble_compress", lambda ranks, models: 3 * (models - 1),
                                              column="between_group_sent_bytes_per_rank_per_update"))
    cfg = resolved(algorithm={"name": "relay_reach", "hop": 5}, parallel={"models": 3, "world_size": 3})
    # the byte identity: the registration's factor, period and column (none of them known by name)
    assert comm_identity.factor("relay_reach", ranks=1, models=3) == 6
    assert comm_identity.column("relay_reach") == "between_group_sent_bytes_per_rank_per_update"
    assert comm_identity.unit_bytes(cfg, bytes_per_update=120.0) == 120.0 * 5 / 6
    assert comm_identity.at_paper({"algorithm": "relay_reach", "models": 4, "period": 10}, 100.0) == 9 * 100.0 / 10
    assert plot_table.setting_text({"algorithm": "relay_reach", "models": 4, "period": 10}) == \
        "relay, 4 models, every 10 updates"
    # the frontier: label and knob, and the cost form its projected time uses (a period: bytes x period)
    label, knob, period, model = frontier_plan.label_of(config.validate(deep_update(TINY, {
        "algorithm": {"name": "relay_reach", "hop": 5}, "parallel": {"models": 2, "world_size": 2}})), {})
    assert (label, knob, period, model) == ("relay h=5", "h", 5, "0")
    assert frontier_walltime.cost_form("relay_reach") == "ensemble_compress"
    # a form without a closed form, and none at all, are one line each
    with pytest.raises(comm_identity.IdentityError, match="'powersgd' registers no closed form"):
        comm_identity.factor("powersgd")
    with pytest.raises(ValueError, match="'label_smoothing' registers no communication form"):
        frontier_walltime.cost_form("label_smoothing")
