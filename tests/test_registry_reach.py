"""What the analysis and the budget read about an algorithm comes from its registration (issue 25
item 3, in part): the exchange period's field (a plugin's `every` as well as the built-ins' `tau` /
`exchange_every`) and the extra forward passes per update the budget charges."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import TINY, deep_update

from codist import budget, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
import regime  # noqa: E402

PERIOD_FRACTION = SimpleNamespace(quantity="period_fraction")
ROUNDS = SimpleNamespace(quantity="rounds")


def resolved(**sections) -> dict:
    return config.to_dict(config.validate(deep_update(TINY, sections)))


def test_a_plugin_algorithms_period_reaches_the_regime_checks():
    import toy_algorithm  # noqa: F401  (registers toy_broadcast, period="every")
    cfg = resolved(algorithm={"name": "toy_broadcast", "every": 3}, parallel={"models": 2, "world_size": 2})
    assert regime.config_quantity(PERIOD_FRACTION, cfg) == 3 / TINY["train"]["steps"]   # was RegimeError
    assert regime.config_quantity(ROUNDS, cfg) == TINY["train"]["steps"] / 3
    assert budget.extra_forwards(config.validate(deep_update(TINY, {
        "algorithm": {"name": "toy_broadcast", "every": 3}, "parallel": {"models": 2, "world_size": 2}}))) == 0.0


def test_builtin_periods_and_a_missing_one():
    cfg = resolved(algorithm={"name": "model_average", "tau": 2}, parallel={"models": 2, "world_size": 2})
    assert regime.config_quantity(PERIOD_FRACTION, cfg) == 2 / TINY["train"]["steps"]
    cfg = resolved(algorithm={"name": "codistill", "exchange_every": 3}, parallel={"models": 2, "world_size": 2})
    assert regime.config_quantity(ROUNDS, cfg) == TINY["train"]["steps"] / 3
    with pytest.raises(regime.RegimeError, match="'allreduce' has no exchange period .*no period field"):
        regime.config_quantity(PERIOD_FRACTION, resolved())
    with pytest.raises(regime.RegimeError, match="'nobody' is not registered"):
        regime.config_quantity(PERIOD_FRACTION, {**resolved(), "algorithm": {"name": "nobody"}})


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
