"""analysis/regime.py's paths that the survivors of its mutation run at ebf9cc2 showed untested
(issue 52): a final that is the last evaluation, not an earlier one; a ratio over a size read from
the config; a measured `over` paired on the seed, and shown against its first declared bound; a
design fact read from the series its check names; the text of one seed and of two; a count of seeds
at a tie. Each test reads a hand-made table whose answer differs at the path it covers."""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import regime  # noqa: E402
import stats  # noqa: E402
from schema import RegimeCheck  # noqa: E402
from test_regime import CLAIM, EC, IMG  # noqa: E402   (s: 6.4 epochs; ec: rounds of 8 shard-epochs)

MANIFEST = {"panels": ["val_accuracy"], "configs": {"s": IMG, "t": IMG, "ec": EC}, "runs": []}


def table(accuracies: dict) -> pd.DataFrame:
    """{(series, seed): [val_accuracy at steps 25, 50, ...]} as a figure's curves."""
    return pd.DataFrame([{"series": s, "seed": seed, "model": "0", "step": 25 * (i + 1), "wall_s": i,
                          "val_accuracy": a, "val_loss": 1.0, "train_loss": 1.0}
                         for (s, seed), accs in accuracies.items() for i, a in enumerate(accs)])


def evaluate(check: dict, curves: pd.DataFrame) -> regime.Result:
    r = RegimeCheck.model_validate({"check": "c", "source": "s", **check})
    return regime.evaluate(r, CLAIM, lambda fig: (MANIFEST, curves))


def test_a_difference_reads_each_seeds_last_evaluation():
    # s - t is 0, 0.1, 0.2 and 0.3 at steps 25-100 on every seed: the final difference is 0.3, not the
    # first (0), the second (0.1) or the one before last (0.2)
    curves = table({**{("s", k): [0.2, 0.4, 0.5, 0.6] for k in range(3)},
                    **{("t", k): [0.2, 0.3, 0.3, 0.3] for k in range(3)}})
    r = evaluate({"quantity": "difference", "min": 0.25}, curves)
    assert r.value == pytest.approx(0.3) and r.state == "shown"


def test_a_measured_quantity_over_a_config_size_is_divided_by_it():
    # s ends at 0.64 on every seed (sd 0): over its 6.4 epochs that is 0.1 a epoch, not 4.1
    curves = table({("s", k): [0.5, 0.64] for k in range(3)})
    r = evaluate({"quantity": "value", "min": 0.09, "max": 0.11, "over": {"quantity": "epochs"}}, curves)
    assert r.value == pytest.approx(0.1) and (r.low, r.high) == pytest.approx((0.1, 0.1)) and r.state == "shown"


def test_a_design_check_over_another_design_size_is_their_ratio():
    # s's 6.4 epochs over ec's 4 rounds: 1.6 (a product would be 25.6), at plan time and after the runs
    check = {"check": "c", "source": "s", "quantity": "epochs", "min": 1.5, "max": 1.7,
             "over": {"quantity": "rounds", "series": "ec"}}
    r = evaluate({k: v for k, v in check.items() if k not in ("check", "source")}, table({("s", 0): [0.5]}))
    assert (r.state, r.design, r.value) == ("design", True, pytest.approx(1.6))
    claim = CLAIM.model_copy(update={"regime": [RegimeCheck.model_validate(check)]})
    assert regime.design_facts(claim, lambda fig, s: MANIFEST["configs"][s]) == [("c", pytest.approx(1.6), True)]


def test_a_design_fact_reads_the_series_its_check_names_else_the_claims_a():
    # ec's rounds of 250 updates of 32 on 1,000-image shards are 8 shard-epochs; s has no period at all
    named = RegimeCheck.model_validate({"check": "named", "source": "s", "quantity": "round_epochs", "series": "ec",
                                        "min": 8, "max": 8})
    own = RegimeCheck.model_validate({"check": "own", "source": "s", "quantity": "epochs", "min": 6.4, "max": 6.4})
    claim = CLAIM.model_copy(update={"regime": [named, own]})
    read = []

    def config_of(fig, series):
        read.append((fig, series))
        return MANIFEST["configs"][series]
    assert regime.design_facts(claim, config_of) == [("named", 8.0, True), ("own", pytest.approx(6.4), True)]
    assert read == [("f", "ec"), ("f", "s")]


def test_a_measured_over_is_paired_on_the_seed():
    # t lacks seed 2, so the effect t - s (the `over`) has seeds 0 and 1 only: the contrast is read on
    # those two seeds, never on s's third seed alone
    curves = table({("s", 0): [0.5], ("s", 1): [0.5], ("s", 2): [0.9], ("t", 0): [0.7], ("t", 1): [0.75]})
    r = evaluate({"quantity": "value", "max": 10, "over": {"quantity": "difference", "series": "t", "b": "s"}}, curves)
    contrast = pd.Series([0.5 - 10 * 0.2, 0.5 - 10 * 0.25])
    half = st.t.ppf(0.95, 1) * contrast.std() / math.sqrt(2)
    assert r.n == 2 and r.value == pytest.approx(0.5 / 0.225)
    assert (r.low, r.high) == pytest.approx((contrast.mean() - half, contrast.mean() + half))


def test_a_check_with_both_bounds_over_a_measured_effect_shows_its_first_bound():
    # v = 0.5 on every seed, o = t - s = 0.2, 0.25, 0.3: the row shows the min's contrast v - 1 x |o|
    # (0.3, 0.25, 0.2), while the state needs both sides (v - 4 |o| <= 0 too)
    curves = table({**{("s", k): [0.5] for k in range(3)}, ("t", 0): [0.7], ("t", 1): [0.75], ("t", 2): [0.8]})
    r = evaluate({"quantity": "value", "min": 1, "max": 4, "over": {"quantity": "difference", "series": "t", "b": "s"}},
                 curves)
    half = st.t.ppf(0.95, 2) * 0.05 / math.sqrt(3)
    assert r.tested == "per seed v - 1 x |o|, needs >= 0"
    assert (r.low, r.high) == pytest.approx((0.25 - half, 0.25 + half)) and r.state == "shown"


def test_one_seed_has_no_bound_and_two_seeds_have_one():
    one = regime.Result("c", "not established", False, 0.5, ">= 0", 1, math.nan, math.nan)
    two = regime.Result("c", "shown", False, 0.5, ">= 0", 2, 0.1, 0.9)
    assert one.text() == "c: 0.5 1 seed(s): no bound (>= 0): not established"
    assert two.text() == "c: 0.5 [0.1, 0.9] over 2 seeds (>= 0): shown"


def test_a_bound_exactly_on_zero_is_not_yet_on_the_means_side():
    # at 4 seeds the bound t(0.95, 3) x 1 / 2 equals the mean exactly: it touches 0, so a fifth seed is asked
    mean = stats.t_quantile(4) * 1.0 / math.sqrt(4)
    assert regime.seeds_to_settle(2, mean, 1.0) == 5
    assert regime.seeds_to_settle(2, mean * (1 + 1e-9), 1.0) == 4


def test_what_a_quantity_reads_cannot_be_changed_by_the_quantity():
    # one Where is handed to a quantity's function; frozen, so no quantity can redirect the next read
    w = regime.where(RegimeCheck.model_validate({"check": "c", "source": "s", "quantity": "value", "min": 0}),
                     CLAIM, lambda fig: (MANIFEST, table({("s", 0): [0.5]})))
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.series = "t"
