"""The power arithmetic of analysis/stats.py against numbers computed here from scipy's t and noncentral t
(issue 52: the survivors of the mutation run at 220f478): at_confidence's bounds and method at another level,
power on either rule (its noncentral t, TOST's floor at 0, NaN without two seeds or a spread),
seeds_for_power's least n (n - 1 falls short, n_max and its default of 1,000 seeds counted, a target met
exactly reached) and detectable on either rule (the effect or margin whose power is 80%, NaN as power's).

Here a power is P(T > t(0.95, n-1)), T ~ nct(n-1, lam); with se = sd / sqrt(n), lam = (effect - t) / se for
`at_least` t, and TOST's is P(T1 > q) + P(T2 > q) - 1 with lam1 = (effect + w) / se and lam2 = (w - effect) / se
around a neutral value of 0, so what n seeds detect at 80% is lam x se where nct.cdf(q, n-1, lam) = 0.2
(at_least: d = t + lam se) or 0.1 (within, true effect 0: w = lam se)."""
from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats as st
from scipy.optimize import brentq

from analysis import stats


def nct_power(n: int, sd: float, effect: float, t: float) -> float:
    df = n - 1
    return st.nct.sf(st.t.ppf(0.95, df), df, (effect - t) * math.sqrt(n) / sd)   # sf: cdf is NaN at large lam


def lam_where_cdf_is(n: int, p: float) -> float:
    """The noncentrality at which nct.cdf(t(0.95, n-1), n-1, lam) = p."""
    df = n - 1
    return brentq(lambda lam: st.nct.cdf(st.t.ppf(0.95, df), df, lam) - p, 0.0, 30.0, xtol=1e-14)


@pytest.mark.parametrize("x, q", [([0.1, 0.5], 0.975), ([0.1, 0.4, 0.2, 0.7], 0.99)])
def test_at_confidence_puts_both_bounds_and_the_method_at_the_new_level(x, q):
    # 2 seeds take the formula like any n; 4 seeds with sd 0.265 (not 1): the bound scales with sd, not 1 / sd
    n, m, sd = len(x), statistics.mean(x), statistics.stdev(x)
    half = st.t.ppf(q, n - 1) * sd / math.sqrt(n)
    iv = stats.at_confidence(stats.t_interval(x), q)
    assert (iv.low, iv.high) == (pytest.approx(m - half), pytest.approx(m + half))
    assert iv.method == f"one-sided t, t({q:.4g}, {n - 1}) = {st.t.ppf(q, n - 1):.3g}"


def test_power_is_the_noncentral_t_on_either_rule():
    # non-inferiority (at_least -0.1) and an equivalence whose true effect is off the neutral value, so
    # each TOST edge has its own noncentrality: 5 seeds, sd 0.3
    assert stats.power(5, 0.3, 0.05, 0.0, at_least=-0.1) == pytest.approx(nct_power(5, 0.3, 0.05, -0.1))
    tost = nct_power(5, 0.3, 0.1, -0.5) + nct_power(5, 0.3, 0.5, 0.1) - 1     # edges at -0.5 and +0.5
    assert 0.05 < tost < 0.95
    assert stats.power(5, 0.3, 0.1, 0.0, within=0.5) == pytest.approx(tost)


def test_power_of_an_effect_far_past_its_threshold_is_one_not_nan():
    # noncentralities of 39-49 (5 and 100 seeds), where scipy 1.17's nct.cdf returns NaN: a huge effect
    # is found with certainty on either rule (with 1 - cdf it read NaN, and the TOST 0)
    assert stats.power(100, 1.0, 3.9, 0.0) == pytest.approx(1.0)
    assert stats.power(5, 1.0, 22.0, 0.0) == pytest.approx(1.0)
    assert stats.power(5, 1.0, 0.0, 0.0, within=22.0) == pytest.approx(1.0)


def test_tost_power_is_floored_at_zero():
    # a margin of 0.01 with sd 1 on 3 seeds: P(T1 > q) + P(T2 > q) - 1 is about -0.9; a chance is not negative
    assert 2 * nct_power(3, 1.0, 0.01, 0.0) - 1 < -0.8
    assert stats.power(3, 1.0, 0.0, 0.0, within=0.01) == 0.0


@pytest.mark.parametrize("rule", [{}, {"within": 1.0}])
@pytest.mark.parametrize("n, sd, effect", [(0, 1.0, 0.5), (1, 1.0, 0.5), (3, 0.0, 0.5), (3, -0.2, 0.5),
                                           (3, 1.0, math.nan)])
def test_power_is_nan_without_two_seeds_or_a_spread(n, sd, effect, rule):
    assert math.isnan(stats.power(n, sd, effect, 0.0, **rule))


def test_seeds_for_power_is_the_least_n_and_n_max_counts():
    # an effect of 1 sd: the least n whose power reaches 80%, found here seed count by seed count
    n = next(m for m in range(2, 100) if nct_power(m, 1.0, 1.0, 0.0) >= 0.8)
    assert n > 3 and nct_power(n - 1, 1.0, 1.0, 0.0) < 0.8
    assert stats.seeds_for_power(1.0, 1.0, 0.0) == n
    assert stats.seeds_for_power(1.0, 1.0, 0.0, n_max=n) == n
    assert stats.seeds_for_power(1.0, 1.0, 0.0, n_max=n - 1) is None
    # "reaches" is >=: a target equal to n seeds' power is met at n
    assert stats.seeds_for_power(1.0, 1.0, 0.0, target=stats.power(n, 1.0, 1.0, 0.0)) == n


def test_two_seeds_can_be_enough_and_an_effect_on_the_threshold_never_is():
    assert nct_power(2, 1.0, 50.0, 0.0) >= 0.8
    assert stats.seeds_for_power(1.0, 50.0, 0.0) == 2
    assert nct_power(50, 1.0, 0.0, 0.0) == pytest.approx(0.05)   # alpha, whatever n
    assert stats.seeds_for_power(1.0, 0.0, 0.0, n_max=50) is None


@pytest.mark.parametrize("n, expected", [(1000, 1000), (1001, None)])
def test_the_default_n_max_is_1000_seeds(n, expected):
    # claims.power_text reads None as "80% needs over 1,000 seeds": an effect that n seeds reach at 80%
    # (and n - 1 do not)
    effect = lam_where_cdf_is(n, 0.2) / math.sqrt(n) * (1 + 1e-6)
    assert nct_power(n - 1, 1.0, effect, 0.0) < 0.8 <= nct_power(n, 1.0, effect, 0.0)
    assert stats.seeds_for_power(1.0, effect, 0.0) == expected


@pytest.mark.parametrize("n, sd", [(2, 0.5), (5, 0.3), (6, 1.0), (100, 1.0), (5, 100.0), (5, 1e-6)])
def test_detectable_is_where_the_power_reaches_80_percent(n, sd):
    # rel 1e-5: detectable's root-find stops within an absolute 2e-12 (brentq's xtol), ~1e-6 of the
    # margin at sd 1e-6
    se = sd / math.sqrt(n)
    t = -0.5 * sd
    assert stats.detectable(n, sd, 0.0, at_least=t) == pytest.approx(t + lam_where_cdf_is(n, 0.2) * se, rel=1e-5)
    assert stats.detectable(n, sd, 0.0, within=0.1) == pytest.approx(lam_where_cdf_is(n, 0.1) * se, rel=1e-5)


@pytest.mark.parametrize("n, sd", [(0, 1.0), (1, 1.0), (3, 0.0), (3, -1.0)])
def test_detectable_is_nan_without_two_seeds_or_a_spread(n, sd):
    assert math.isnan(stats.detectable(n, sd, 0.0))
    assert math.isnan(stats.detectable(n, sd, 0.0, within=0.1))
