"""The claims analysis' decision rules pinned on both sides of each boundary (analysis/stats.py's
intervals, verdicts and margins, analysis/regime.py's gate quantities). Every expected number is
derived by hand here (t quantiles from tables, standard errors written out), never by calling the
function under test."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import regime  # noqa: E402
import stats  # noqa: E402
from schema import RegimeCheck  # noqa: E402
from test_regime import CLAIM, IMG, MANIFEST, measure_on  # noqa: E402
from test_regime import curves as regime_curves  # noqa: E402

# one-sided t quantiles with 2 and 4 degrees of freedom (tables)
T95_2, T90_2, T80_2 = 2.91998558, 1.88561808, 1.06066017
T95_4 = 2.13184679
EPS = 1e-4


def decide(values, neutral=0.0, at_least=None, within=None):
    return stats.decide(stats.t_interval(pd.Series(values, dtype=float)), neutral, at_least, within)[0]


# ------------------------------------------------------------------ t intervals
def test_t_interval_bounds_by_hand():
    # [0.10, 0.11, 0.12]: mean 0.11, sd 0.01, se 0.01 / sqrt 3 = 0.0057735; half = 2.9199856 se = 0.0168585
    iv = stats.t_interval([0.10, 0.11, 0.12])
    assert (iv.n, iv.mean, iv.sd) == (3, pytest.approx(0.11), pytest.approx(0.01))
    assert iv.low == pytest.approx(0.0931415, abs=1e-7) and iv.high == pytest.approx(0.1268585, abs=1e-7)
    # 5 seeds [1, 2, 3, 4, 5]: sd sqrt(2.5) = 1.5811388, se 0.7071068, half 2.13184679 x se = 1.5074433
    iv = stats.t_interval([1, 2, 3, 4, 5])
    assert (iv.low, iv.high) == (pytest.approx(3 - 1.5074433, abs=1e-6), pytest.approx(3 + 1.5074433, abs=1e-6))


@pytest.mark.parametrize("at_least, verdict", [
    (0.0931415 - EPS, "holds"), (0.0931415 + EPS, "inconclusive"),          # the lower bound 0.0931415
    (0.1268585 - EPS, "inconclusive"), (0.1268585 + EPS, "does not hold"),  # the upper bound 0.1268585
])
def test_at_least_on_both_sides_of_each_bound(at_least, verdict):
    assert decide([0.10, 0.11, 0.12], at_least=at_least) == verdict


def test_default_threshold_is_the_neutral_value():
    # [0.9, 1.0, 1.1] around a speedup's neutral 1: half = 2.9199856 x 0.1 / sqrt 3 = 0.1685857
    assert decide([0.9, 1.0, 1.1], neutral=1.0) == "inconclusive"
    assert decide([0.9, 1.0, 1.1], neutral=1.0 - 0.1685857 - EPS) == "holds"
    assert decide([0.9, 1.0, 1.1], neutral=1.0 + 0.1685857 + EPS) == "does not hold"


def test_two_seeds_never_decide():
    assert decide([0.5, 0.5001]) == "inconclusive" and decide([-0.5, -0.5001]) == "inconclusive"


# ------------------------------------------------------------------ TOST and non-inferiority margins
@pytest.mark.parametrize("values, within, verdict", [
    # mean 0, sd 0.001, half 2.9199856 x 0.001 / sqrt 3 = 0.0016858: both bounds inside +/- w iff w >= 0.0016858
    ([-0.001, 0.0, 0.001], 0.0016858 + EPS / 10, "holds"),
    ([-0.001, 0.0, 0.001], 0.0016858 - EPS / 10, "inconclusive"),
    # mean 0.055, sd 0.005, half 0.0084293: low = 0.0465707; outside the margin iff low > w
    ([0.05, 0.06, 0.055], 0.0465707 - EPS, "does not hold"),
    ([0.05, 0.06, 0.055], 0.0465707 + EPS, "inconclusive"),
    # the mirror image: high = -0.0465707 < -w
    ([-0.05, -0.06, -0.055], 0.0465707 - EPS, "does not hold"),
    ([-0.05, -0.06, -0.055], 0.0465707 + EPS, "inconclusive"),
])
def test_equivalence_margin_on_both_sides(values, within, verdict):
    assert decide(values, within=within) == verdict


@pytest.mark.parametrize("at_least, verdict", [
    # [-0.010, -0.011, -0.012]: mean -0.011, half 0.0016858: low -0.0126858, high -0.0093142
    (-0.0126858 - EPS, "holds"), (-0.0126858 + EPS, "inconclusive"),
    (-0.0093142 - EPS, "inconclusive"), (-0.0093142 + EPS, "does not hold"),
])
def test_non_inferiority_margin_on_both_sides(at_least, verdict):
    assert decide([-0.010, -0.011, -0.012], at_least=at_least) == verdict


def test_margin_of_a_claim():
    assert stats.margin_of(0.0, within=0.01) == (0.01, True)
    assert stats.margin_of(0.0, at_least=-0.02) == (pytest.approx(0.02), False)   # non-inferiority
    assert stats.margin_of(1.0, at_least=0.9) == (pytest.approx(0.1), False)
    assert stats.margin_of(0.0, at_least=0.0) is None and stats.margin_of(1.0, at_least=1.2) is None   # superiority
    assert stats.margin_of(0.0) is None


# ------------------------------------------------------------------ the jackknife
def test_jackknife_variance_factor_by_hand():
    # leave seed 0 out: only pair (1,2) = 0.12; seed 1 out: 0.11; seed 2 out: 0.10. Their mean 0.11,
    # squared deviations sum 0.0002; se = sqrt((n-1)/n x 0.0002) = sqrt(2/3 x 0.0002) = 0.0115470;
    # half = 2.9199856 x se = 0.0337171 (a factor 1/(n(n-1)) or 3x the se would both miss this)
    iv = stats.jackknife_interval({("0", "1"): 0.10, ("0", "2"): 0.11, ("1", "2"): 0.12})
    assert iv.mean == pytest.approx(0.11)
    assert iv.low == pytest.approx(0.11 - 0.0337171, abs=1e-6) and iv.high == pytest.approx(0.11 + 0.0337171, abs=1e-6)
    assert iv.sd == pytest.approx(0.0115470 * math.sqrt(3), abs=1e-6)
    assert stats.decide(iv, 0.0, at_least=0.0762829 - EPS)[0] == "holds"
    assert stats.decide(iv, 0.0, at_least=0.0762829 + EPS)[0] == "inconclusive"


def test_jackknife_sees_an_outlier_seed():
    # leave-one-out means 0.31, 0.30, 0.10 (mean 0.2366667); squared deviations 0.0053778 + 0.0040111 +
    # 0.0186778 = 0.0280667; se = sqrt(2/3 x 0.0280667) = 0.1367885; low = 0.2366667 - 2.9199856 se = -0.1627540
    iv = stats.jackknife_interval({("0", "1"): 0.10, ("0", "2"): 0.30, ("1", "2"): 0.31})
    assert iv.low == pytest.approx(-0.1627540, abs=1e-6)
    assert stats.decide(iv, 0.0)[0] == "inconclusive"


def test_jackknife_with_five_seeds_uses_t_of_4():
    # 5 seeds, pair value = x_i + x_j with x = 0, 1, 2, 3, 4: the mean of pairs is 2 mean(x) = 4; leaving seed k
    # out, the mean over the 6 remaining pairs is 2 mean(x without k) = 2 (10 - k) / 4 = 5 - k/2: values 5, 4.5,
    # 4, 3.5, 3 (mean 4, squared deviations 2.5); se = sqrt(4/5 x 2.5) = sqrt(2) = 1.4142136
    x = [0, 1, 2, 3, 4]
    pairs = {(str(i), str(j)): float(x[i] + x[j]) for i in range(5) for j in range(i + 1, 5)}
    iv = stats.jackknife_interval(pairs)
    assert iv.mean == pytest.approx(4.0)
    assert iv.low == pytest.approx(4 - T95_4 * 1.4142136, abs=1e-5)


# ------------------------------------------------------------------ censored speedups
def test_all_censored_speedup_below_one_does_not_hold():
    # speed-imagenet's upper bounds: mean 0.4956667, sd 0.1261322 (squared deviations 0.0318187 / 2),
    # se 0.0728224, high = 0.4956667 + 2.9199856 se = 0.7083072 < 1
    iv = stats.upper_bound_interval(pd.Series([0.625, 0.373, 0.489]))
    assert math.isnan(iv.low) and iv.high == pytest.approx(0.7083072, abs=1e-6)
    assert stats.decide(iv, 1.0)[0] == "does not hold"
    assert stats.decide(iv, 1.0, at_least=0.7083072 - EPS)[0] == "inconclusive"
    assert stats.decide(iv, 1.0, at_least=0.7083072 + EPS)[0] == "does not hold"


def test_a_censored_speedup_never_holds():
    # bounds far above the threshold say only that the ratio is below them: no lower bound
    iv = stats.upper_bound_interval(pd.Series([3.0, 3.1, 3.2]))
    assert stats.decide(iv, 1.0)[0] == "inconclusive"
    assert stats.decide(iv, 1.0, within=5.0)[0] == "inconclusive"


# ------------------------------------------------------------------ steps to a target
def test_interpolated_steps_to_target():
    assert stats.steps_to([10, 20, 30], [3.0, 2.0, 1.0], 1.5, higher=False) == pytest.approx(25.0)
    assert stats.steps_to([10, 20], [0.2, 0.6], 0.5, higher=True) == pytest.approx(17.5)
    assert stats.steps_to([10, 20], [0.2, 0.6], 0.1, higher=True) == 10.0      # past it at the first evaluation
    assert stats.steps_to([10, 20], [3.0, 2.0], 1.0, higher=False) is None
    assert stats.steps_to([10, 20], [3.0, 2.0], 2.0, higher=False) == pytest.approx(20.0)   # reaching = equal


# ------------------------------------------------------------------ the underpowered rule
def test_resolvable_margin_by_hand():
    # one accuracy on V examples has variance 0.25 / V, a difference twice that: sd = sqrt(0.5 / V).
    # TOST at 80% power: (t(0.95, 2) + t(0.90, 2)) / sqrt 3 = 4.8056037 / 1.7320508 = 2.7745166
    assert stats.resolvable_margin(3, 1000) == pytest.approx(2.7745166 * math.sqrt(0.5 / 1000), rel=1e-6)   # 0.0620401
    assert stats.resolvable_margin(3, 1000) == pytest.approx(0.0620401, abs=1e-6)
    assert stats.resolvable_margin(3, 2000) == pytest.approx(0.0438690, abs=1e-6)
    assert stats.resolvable_margin(3, 50_000) == pytest.approx(0.0087738, abs=1e-6)
    # non-inferiority, one test: (t(0.95, 2) + t(0.80, 2)) / sqrt 3 = 3.9806457 / 1.7320508 = 2.2982269
    assert stats.resolvable_margin(3, 1000, equivalence=False) == pytest.approx(0.0513899, abs=1e-6)
    # four accuracies (a gain that grows: (a - b) - (a2 - b2)): sd sqrt(1 / V)
    assert stats.resolvable_margin(3, 1000, terms=4) == pytest.approx(2.7745166 * math.sqrt(1 / 1000), rel=1e-6)


def test_margin_needed_from_a_measured_sd():
    # sd 0.0132288 (the effects 0, 0.02, -0.005), 3 seeds: TOST needs 2.7745166 x sd = 0.0367034
    assert stats.margin_needed(3, 0.0132288, equivalence=True) == pytest.approx(0.0367034, abs=1e-6)
    assert stats.margin_needed(3, 0.0132288, equivalence=False) == pytest.approx(2.2982269 * 0.0132288, abs=1e-6)
    # the quantiles behind every bound, against the tables
    assert stats.t_quantile(3) == pytest.approx(T95_2, abs=1e-7) and stats.t_quantile(5) == pytest.approx(T95_4, abs=1e-7)
    assert stats.t_quantile(3, 0.90) == pytest.approx(T90_2, abs=1e-7)
    assert stats.t_quantile(3, 0.80) == pytest.approx(T80_2, abs=1e-7)


# ------------------------------------------------------------------ exact boundaries (hand-made intervals)
def interval(low, high, n=3):
    return stats.Interval(n, (low + high) / 2, 0.1, low, high, "by hand")


def test_at_least_is_strict_at_both_bounds():
    # effect > t: a lower bound equal to t does not show it; an upper bound equal to t does not refute it
    assert stats.decide(interval(0.5, 0.9), 0.0, at_least=0.5)[0] == "inconclusive"
    assert stats.decide(interval(0.5 + 2 ** -20, 0.9), 0.0, at_least=0.5)[0] == "holds"
    assert stats.decide(interval(0.1, 0.5), 0.0, at_least=0.5)[0] == "inconclusive"
    assert stats.decide(interval(0.1, 0.5 - 2 ** -20), 0.0, at_least=0.5)[0] == "does not hold"


def test_within_is_a_closed_band_and_outside_is_strict():
    # neutral 1, w 0.25: the band [0.75, 1.25] (exact in binary); bounds on its edges lie inside it
    assert stats.decide(interval(0.75, 1.25), 1.0, within=0.25)[0] == "holds"
    assert stats.decide(interval(0.75 - 2 ** -20, 1.25), 1.0, within=0.25)[0] == "inconclusive"
    assert stats.decide(interval(0.75, 1.25 + 2 ** -20), 1.0, within=0.25)[0] == "inconclusive"
    # an interval touching the band from outside is not outside it
    assert stats.decide(interval(1.25, 1.5), 1.0, within=0.25)[0] == "inconclusive"
    assert stats.decide(interval(1.25 + 2 ** -20, 1.5), 1.0, within=0.25)[0] == "does not hold"
    assert stats.decide(interval(0.5, 0.75), 1.0, within=0.25)[0] == "inconclusive"
    assert stats.decide(interval(0.5, 0.75 - 2 ** -20), 1.0, within=0.25)[0] == "does not hold"


def test_three_seeds_decide_and_two_do_not_whatever_the_bounds():
    for kw in ({}, {"within": 0.25}):
        assert stats.decide(interval(0.9, 1.1, n=2), 1.0 if kw else 0.0, **kw)[0] == "inconclusive"
        assert stats.decide(interval(0.9, 1.1, n=3), 1.0 if kw else 0.0, **kw)[0] == "holds"


# ------------------------------------------------------------------ what an interval says it is
def test_one_seed_has_no_interval_and_an_infinite_quantile():
    assert stats.t_quantile(1) == math.inf and stats.t_quantile(0) == math.inf
    iv = stats.t_interval([0.4])
    assert iv.n == 1 and iv.mean == 0.4 and math.isnan(iv.sd) and math.isnan(iv.low) and math.isnan(iv.high)
    assert iv.method == "one-sided t (needs 2 seeds)"
    assert stats.upper_bound_interval(pd.Series([0.4])).method == "one-sided t (needs 2 seeds)"
    iv = stats.t_interval([])
    assert iv.n == 0 and math.isnan(iv.mean)


def test_methods_name_the_degrees_of_freedom():
    # 3 seeds: t(0.95, 2) = 2.92; 5 seeds: t(0.95, 4) = 2.13
    assert stats.t_interval([1, 2, 3]).method == "one-sided t, t(0.95, 2) = 2.92"
    assert stats.upper_bound_interval(pd.Series([1, 2, 3, 4, 5])).method == (
        "one-sided t upper bound on censored upper bounds, t(0.95, 4) = 2.13")
    iv = stats.jackknife_interval({("0", "1"): 0.10, ("0", "2"): 0.11, ("1", "2"): 0.12})
    assert iv.method == "seed-level jackknife, t(0.95, 2) = 2.92"


def test_jackknife_needs_every_seed_left_out_once():
    # seed 0 is in both pairs: leaving it out leaves no pair, so its leave-one-out value is missing
    iv = stats.jackknife_interval({("0", "1"): 0.10, ("0", "2"): 0.11})
    assert iv.n == 3 and iv.mean == pytest.approx(0.105)
    assert math.isnan(iv.low) and math.isnan(iv.high) and iv.method == "seed-level jackknife (needs 3 seeds)"
    iv = stats.jackknife_interval({("0", "1"): 0.10})    # two seeds
    assert iv.n == 2 and math.isnan(iv.sd) and math.isnan(iv.low)
    assert math.isnan(stats.jackknife_interval({}).mean)


def test_seed_pairs_split_at_the_first_dash():
    assert stats.seed_pairs({"0-1": 0.1, "10-2": 0.2}) == {("0", "1"): 0.1, ("10", "2"): 0.2}


def test_the_validation_floor_of_a_difference_by_default():
    # two accuracies on 1,000 examples, p = 0.5: variance 2 x 0.25 / 1000
    assert stats.val_set_sd(1000) == pytest.approx(math.sqrt(0.5 / 1000), rel=1e-12)
    assert stats.val_set_sd(1000, p=0.9) == pytest.approx(math.sqrt(2 * 0.09 / 1000), rel=1e-12)


# ------------------------------------------------------------------ the regime gate's quantities
def speed_curves(metric, a, b_by_seed):
    """Evaluations at steps 10, 20, 30 of series a (the same every seed) and b (one list per seed)."""
    rows = []
    for seed, bv in enumerate(b_by_seed):
        for step, va, vb in zip((10, 20, 30), a, bv):
            rows.append({"series": "a", "seed": seed, "model": "0", "step": step, metric: va})
            rows.append({"series": "b", "seed": seed, "model": "0", "step": step, metric: vb})
    return pd.DataFrame(rows)


def test_speedup_target_best_or_final_of_the_baseline():
    # b's best is 0.5 at step 20 (seed 0) and 0.45 (seed 1), its final 0.4 on both
    table = speed_curves("val_accuracy", [0.3, 0.6, 0.7], [[0.1, 0.5, 0.4], [0.1, 0.45, 0.4]])
    best = regime.speedups(table, "a", "0", "b", "0", "val_accuracy", "b_best")
    # level 0.45, the least best: b reaches it at 10 + 10 x 0.35/0.4 = 18.75 (seed 0), at 20 (seed 1);
    # a at 10 + 10 x 0.15/0.3 = 15
    assert best["target"].tolist() == [0.45, 0.45]
    assert best["ratio"].tolist() == pytest.approx([18.75 / 15, 20 / 15])
    final = regime.speedups(table, "a", "0", "b", "0", "val_accuracy", "b_final")
    # level 0.4: b at 10 + 10 x 0.3/0.4 = 17.5 (seed 0), 10 + 10 x 0.3/0.35 = 18.5714286 (seed 1); a at 13.333333
    assert final["target"].tolist() == [0.4, 0.4]
    assert final["ratio"].tolist() == pytest.approx([17.5 / (40 / 3), 18.5714286 / (40 / 3)])


def test_speedup_target_of_a_loss_is_the_highest_of_the_bests():
    table = speed_curves("val_loss", [2.0, 1.0, 0.9], [[2.0, 1.0, 1.2], [2.0, 1.1, 1.2]])
    assert regime.speedups(table, "a", "0", "b", "0", "val_loss", "b_best")["target"].tolist() == [1.1, 1.1]
    assert regime.speedups(table, "a", "0", "b", "0", "val_loss", "b_final")["target"].tolist() == [1.2, 1.2]


CODISTILL_K25 = {**IMG, "algorithm": {"name": "codistill", "exchange_every": 25, "burn_in": 0}}


@pytest.mark.parametrize("burn_in, metric, lag", [
    # the mean curve of s: accuracy 0.21, 0.41, 0.51, 0.53 (val_loss 2.0, 1.8, 1.7, 1.7) at steps 25-100;
    # exchanges at 0, 25, 50, 75 (np.interp holds the first value before step 25): gains 0, 0.2, 0.1, 0.02
    (0, "val_accuracy", 0.2),
    (0, "val_loss", 0.2),                # oriented: a falling loss is a gain
    # burn-in 30: exchanges at 30 and 55 only (80 + 25 > 100): 0.43 - 0.25 = 0.18, 0.514 - 0.43 = 0.084
    (30, "val_accuracy", 0.18),
])
def test_exchange_lag_is_the_largest_gain_over_one_period(burn_in, metric, lag):
    cfg = {**CODISTILL_K25, "algorithm": {**CODISTILL_K25["algorithm"], "burn_in": burn_in}}
    manifest = {**MANIFEST, "configs": {**MANIFEST["configs"], "s": cfg}}
    assert measure_on(manifest, regime_curves(), CLAIM, quantity="exchange_lag", metric=metric) == pytest.approx(lag)


def test_exchange_lag_needs_one_full_period_after_burn_in():
    cfg = {**CODISTILL_K25, "algorithm": {**CODISTILL_K25["algorithm"], "burn_in": 76}}   # 76 + 25 > 100
    manifest = {**MANIFEST, "configs": {**MANIFEST["configs"], "s": cfg}}
    with pytest.raises(regime.RegimeError, match="no full exchange period of 25 steps after burn-in in a run of 100"):
        measure_on(manifest, regime_curves(), CLAIM, quantity="exchange_lag")
    cfg["algorithm"]["burn_in"] = 75                                                       # one period: 75 -> 100
    assert measure_on(manifest, regime_curves(), CLAIM, quantity="exchange_lag") == pytest.approx(0.02)


def test_criteo_sizes_from_its_line_count():
    # train.txt's 45,840,617 labelled lines, 10% held out unless a validation file is given
    assert regime.data_sizes({"name": "ctr", "dataset": "criteo"}) == (
        pytest.approx(41_256_555.3), pytest.approx(4_584_061.7))
    assert regime.data_sizes({"name": "ctr", "dataset": "criteo", "max_lines": 1000, "val_fraction": 0.2}) == (
        pytest.approx(800), pytest.approx(200))
    train, val = regime.data_sizes({"name": "ctr", "dataset": "criteo", "val_file": "v.txt"})
    assert train == 45_840_617 and math.isnan(val)


def test_imagenet_quarter_is_a_quarter_of_the_training_set_and_all_of_validation():
    # Sodhani Fig. 6: a quarter of each class of ILSVRC-2012's 1,281,167 images; the 50,000 validation images
    assert regime.data_sizes({"name": "imagenet", "dataset": "imagefolder", "data_dir": "imagenet_quarter"}) == (
        320_291.75, 50_000)
    assert regime.data_sizes({"name": "imagenet", "dataset": "imagefolder", "data_dir": "imagenet"}) == (
        1_281_167, 50_000)


def test_two_censored_seeds_have_a_bound_with_one_degree_of_freedom():
    # upper bounds 0.5, 0.7: mean 0.6, sd 0.1414214, se 0.1; t(0.95, 1) = 6.3137515: high = 1.2313751
    iv = stats.upper_bound_interval(pd.Series([0.5, 0.7]))
    assert iv.method == "one-sided t upper bound on censored upper bounds, t(0.95, 1) = 6.31"
    assert iv.high == pytest.approx(1.2313751, abs=1e-6) and math.isnan(iv.low)


def test_a_curve_that_reaches_the_target_exactly_reaches_it():
    assert stats.steps_to([10, 20], [0.2, 0.5], 0.5, higher=True) == 20.0
    assert stats.steps_to([10, 20], [0.5, 0.6], 0.5, higher=True) == 10.0


# the real data sets' sizes (sources: analysis/regime.py's DATA_SETS comment): a wrong one moves every
# full-scale epoch count and the underpowered rule's validation floor
@pytest.mark.parametrize("workload, sizes", [
    ({"name": "cifar", "dataset": "cifar10"}, (50_000, 10_000)),
    ({"name": "cifar", "dataset": "cifar100"}, (50_000, 10_000)),
    ({"name": "translation", "dataset": "fairseq", "data_dir": "wmt16_en_de_bpe32k"}, (4_500_966, 3_000)),
    ({"name": "translation", "dataset": "fairseq", "data_dir": "iwslt14_de_en"}, (160_239, 7_283)),
])
def test_real_data_set_sizes(workload, sizes):
    assert regime.data_sizes(workload) == sizes


def test_a_text_corpus_counts_segments_of_seq_len_tokens():
    # Common Crawl's 6 x 10^11 tokens in 32-token segments (the default) = 1.875 x 10^10; in 64: 9.375 x 10^9
    train, val = regime.data_sizes({"name": "lm", "dataset": "text", "data_dir": "common_crawl_wet"})
    assert train == 1.875e10 and math.isnan(val)
    assert regime.data_sizes({"name": "lm", "dataset": "text", "data_dir": "common_crawl_wet", "seq_len": 64})[0] == 9.375e9


def sgd(batch, world=1, models=None):
    p = {"world_size": world, **({"models": models} if models else {})}
    return {**IMG, "parallel": p, "train": {**IMG["train"], "batch_per_rank": batch}}


def test_critical_ratio_compares_sync_sgd_with_itself_at_twice_the_batch():
    regime._doubled_batch(sgd(128), "b2", sgd(64), "b")             # 128 = 2 x 64
    regime._doubled_batch(sgd(64, world=2), "b2", sgd(64), "b")     # 2 ranks x 64 = 2 x 64
    with pytest.raises(regime.RegimeError, match=r"series 'b2' has 96 examples per update, not twice series 'b''s 64"):
        regime._doubled_batch(sgd(96), "b2", sgd(64), "b")
    with pytest.raises(regime.RegimeError, match=r"critical_ratio: series 'b2' is not sync SGD of one model"):
        regime._doubled_batch(sgd(64, world=2, models=2), "b2", sgd(64), "b")
    codistill = {**sgd(128), "algorithm": {"name": "codistill"}}
    with pytest.raises(regime.RegimeError, match=r"series 'b2' is not sync SGD of one model \(algorithm 'codistill'\)"):
        regime._doubled_batch(codistill, "b2", sgd(64), "b")


def test_an_algorithm_without_a_period_has_no_rounds():
    with pytest.raises(regime.RegimeError, match=r"algorithm 'allreduce' has no exchange period \(its registration "
                                                 r"names no period field\)"):
        regime._period(IMG)
    with pytest.raises(regime.RegimeError, match=r"algorithm 'model_average' has no exchange period \(its registration "
                                                 r"names 'tau', not in this config\)"):
        regime._period({**IMG, "algorithm": {"name": "model_average"}})
    assert regime._period({**IMG, "algorithm": {"name": "model_average", "tau": 50}}) == 50


def test_an_unregistered_algorithm_is_one_regime_error():
    # the registry's KeyError becomes a RegimeError with its message unquoted (a KeyError's str() quotes it)
    with pytest.raises(regime.RegimeError, match=r"^algorithm 'zz' is not registered \(a plugin's module must be in "
                                                 r"CODIST_PLUGINS\)$"):
        regime._period({**IMG, "algorithm": {"name": "zz", "tau": 5}})


def test_embedded_translation_counts_its_sentence_pairs_train_and_validation():
    # the embedded translation workload's training set is `pairs` (translation_config.py: no train_size)
    assert regime.data_sizes({"name": "translation", "dataset": "embedded", "pairs": 4000})[0] == 4000
    # and its validation set is `val_pairs`
    assert regime.data_sizes({"name": "translation", "dataset": "embedded", "pairs": 4000,
                              "val_pairs": 500}) == (4000, 500)


def test_disjoint_shards_without_a_models_entry_are_one_models_data():
    # parallel without `models`: one model, so its shard is the whole 1,000 examples (100 x 64 / 1000 = 6.4 epochs)
    cfg = {**IMG, "algorithm": {"name": "allreduce", "data": "disjoint"}, "parallel": {"world_size": 1}}
    assert regime.design_value(RegimeCheck.model_validate({"check": "c", "source": "s", "min": 0,
                                                              "quantity": "epochs"}), cfg) == pytest.approx(6.4)


def test_a_check_that_cannot_be_measured_names_itself():
    tables = lambda fig: (MANIFEST, regime_curves())   # noqa: E731
    check = {"check": "gate", "source": "s", "min": 0}
    # a ValueError (a metric the runs do not have) and a KeyError (a config without train:) both become
    # one RegimeError naming the check
    with pytest.raises(regime.RegimeError, match=r"^regime check 'gate': metric 'bleu' is not in the runs' metrics rows"):
        regime.evaluate(RegimeCheck.model_validate({**check, "quantity": "value", "metric": "bleu"}), CLAIM, tables)
    broken = {**MANIFEST, "configs": {"s": {"algorithm": {"name": "model_average", "tau": 5}}}}
    with pytest.raises(regime.RegimeError, match=r"^regime check 'gate': 'train'$"):
        regime.evaluate(RegimeCheck.model_validate({**check, "quantity": "rounds"}), CLAIM,
                        lambda fig: (broken, regime_curves()))


def test_an_unknown_data_set_lists_the_known_ones():
    known = "['cifar10', 'cifar100', 'imagenet', 'imagenet_quarter', 'iwslt14_de_en', 'wmt16_en_de_bpe32k']"
    with pytest.raises(regime.RegimeError) as e:
        regime.data_sizes({"name": "imagenet", "dataset": "imagefolder", "data_dir": "other"})
    assert str(e.value) == ("workload 'imagenet', dataset 'imagefolder', data_dir 'other': size unknown "
                            f"(analysis/regime.py DATA_SETS has {known})")


def test_an_interval_cannot_be_changed_after_it_is_made():
    import dataclasses
    iv = stats.t_interval([0.10, 0.11, 0.12])
    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.low = 0.2
