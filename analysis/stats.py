"""The statistics every claim uses: a one-sided t interval over seeds, the seed-level jackknife
for pairwise measures (churn), interpolated steps-to-target with censoring and the t bound on
censored speedups' upper bounds, the verdict rule, and the smallest margin (equivalence or
non-inferiority) that n seeds resolve at 80% power given the effect's sd.

Why these: with n = 3 seeds, mean +/- 2 standard errors is a one-sided test at alpha ~ 0.09
(t(0.95, 2) = 2.92), so the bound uses t(0.95, n-1); a churn value belongs to a pair of seeds,
and the 3 pairs of 3 seeds share seeds, so they are resampled by leaving out one seed at a time,
never treated as 3 independent values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95          # each one-sided bound; an equivalence (TOST) uses both at this level
POWER = 0.80               # what "resolvable" means for an equivalence margin
MIN_SEEDS = 3


@dataclass(frozen=True)
class Interval:
    n: int
    mean: float
    sd: float
    low: float             # one-sided lower bound at CONFIDENCE
    high: float            # one-sided upper bound at CONFIDENCE
    method: str


def t_quantile(n: int, q: float = CONFIDENCE) -> float:
    return float(stats.t.ppf(q, n - 1)) if n > 1 else math.inf


def t_interval(x) -> Interval:
    """Mean of independent per-seed effects, bounds mean -/+ t(0.95, n-1) sd / sqrt(n)."""
    x = pd.Series(x, dtype=float).dropna()
    n = len(x)
    m = float(x.mean()) if n else math.nan
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    half = t_quantile(n) * sd / math.sqrt(n) if n > 1 else math.nan
    return Interval(n, m, sd, m - half, m + half, f"one-sided t, t(0.95, {n - 1}) = {t_quantile(n):.3g}"
                    if n > 1 else "one-sided t (needs 2 seeds)")


def at_confidence(iv: Interval, q: float) -> Interval:
    """The same interval with each one-sided bound at level q instead of CONFIDENCE (a sequential
    claim's looks, analysis/sequential.py): mean -/+ t(q, n-1) sd / sqrt(n) (the jackknife's sd is
    its se x sqrt(n), so the same formula); a missing bound (NaN) stays missing."""
    if iv.n < 2 or math.isnan(iv.sd):
        return iv
    half = t_quantile(iv.n, q) * iv.sd / math.sqrt(iv.n)
    low = math.nan if math.isnan(iv.low) else iv.mean - half
    high = math.nan if math.isnan(iv.high) else iv.mean + half
    method = iv.method.replace(f"t({CONFIDENCE:g}, {iv.n - 1}) = {t_quantile(iv.n):.3g}",
                               f"t({q:.4g}, {iv.n - 1}) = {t_quantile(iv.n, q):.3g}")
    return Interval(iv.n, iv.mean, iv.sd, low, high, method)


def upper_bound_interval(u) -> Interval:
    """A speedup with censored seeds: `u` is per seed the ratio where a reached the target and
    the censored seeds' upper bound otherwise (b's steps / a's whole run: a needed more). Each u_i
    >= that seed's true ratio, so a t upper bound on the mean of u (a valid bound for E[u], the u_i
    being independent per-seed values) bounds the mean ratio from above; nothing bounds it from
    below (a run that never reaches has ratio 0), so `low` is NaN: such a speedup can be shown
    not to hold, never to hold."""
    iv = t_interval(u)
    return Interval(iv.n, iv.mean, iv.sd, math.nan, iv.high,
                    f"one-sided t upper bound on censored upper bounds, t(0.95, {iv.n - 1}) = {t_quantile(iv.n):.3g}"
                    if iv.n > 1 else "one-sided t (needs 2 seeds)")


def jackknife_interval(pairs: dict[tuple[str, str], float]) -> Interval:
    """A mean over pairs of seeds, with a leave-one-seed-out jackknife standard error and
    t(0.95, n_seeds - 1): one outlier seed moves every pair it is in, and the jackknife sees that."""
    seeds = sorted({s for p in pairs for s in p})
    n = len(seeds)
    m = float(np.mean(list(pairs.values()))) if pairs else math.nan
    loo = [np.mean([v for p, v in pairs.items() if s not in p]) for s in seeds
           if any(s not in p for p in pairs)]
    if n < 3 or len(loo) < n:
        return Interval(n, m, math.nan, math.nan, math.nan, "seed-level jackknife (needs 3 seeds)")
    se = math.sqrt((n - 1) / n * float(np.sum((np.array(loo) - np.mean(loo)) ** 2)))
    half = t_quantile(n) * se
    return Interval(n, m, se * math.sqrt(n), m - half, m + half,
                    f"seed-level jackknife, t(0.95, {n - 1}) = {t_quantile(n):.3g}")


def seed_pairs(values: dict[str, float]) -> dict[tuple[str, str], float]:
    """Split "a-b" pair labels (paper_table.py's churn rows) into seed tuples."""
    return {tuple(k.split("-", 1)): v for k, v in values.items()}


# ----------------------------------------------------------------------- speedups

def steps_to(steps, values, target: float, higher: bool) -> float | None:
    """First step at which the curve reaches `target`, linearly interpolated between the two
    evaluations around the crossing (a curve already past it at its first evaluation counts that
    evaluation's step); None when it never does (censored)."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    ok = values >= target if higher else values <= target
    if not ok.any():
        return None
    i = int(np.argmax(ok))
    if i == 0:
        return float(steps[0])
    v0, v1 = values[i - 1], values[i]
    frac = (target - v0) / (v1 - v0) if v1 != v0 else 1.0
    return float(steps[i - 1] + frac * (steps[i] - steps[i - 1]))


# ----------------------------------------------------------------------- verdicts

def decide(iv: Interval, neutral: float, at_least=None, within=None) -> tuple[str, str]:
    """(verdict, rule). `at_least: t` (default: the neutral value): holds if the lower bound > t,
    does not hold if the upper bound < t. `within: w` (a match, two one-sided tests): holds if
    both bounds lie in [neutral - w, neutral + w], does not hold if either bound lies outside it
    on the far side of the mean. Fewer than MIN_SEEDS: inconclusive. A missing bound (NaN: a
    censored speedup has no lower bound) decides nothing on its side (NaN compares false)."""
    if within is not None:
        rule = f"abs(effect - {neutral:g}) <= {within:g}"
        if iv.n < MIN_SEEDS:
            return "inconclusive", rule
        lo, hi = neutral - within, neutral + within
        if lo <= iv.low and iv.high <= hi:
            return "holds", rule
        if iv.low > hi or iv.high < lo:
            return "does not hold", rule
        return "inconclusive", rule
    t = neutral if at_least is None else float(at_least)
    rule = f"effect > {t:g}"
    if iv.n < MIN_SEEDS:
        return "inconclusive", rule
    return ("holds" if iv.low > t else "does not hold" if iv.high < t else "inconclusive"), rule


# ----------------------------------------------------------------------- power

def margin_of(neutral: float, at_least=None, within=None) -> tuple[float, bool] | None:
    """(margin, equivalence) of a claim that has one: `within: w` (an equivalence, TOST) or
    `at_least` on the far side of the neutral value (non-inferiority: a may be worse than b by
    neutral - at_least). None for superiority claims (at_least >= neutral): their power depends
    on the true effect, which nothing states before the runs."""
    if within is not None:
        return float(within), True
    if at_least is not None and float(at_least) < neutral:
        return neutral - float(at_least), False
    return None


def margin_needed(n: int, sd: float, equivalence: bool, confidence: float = CONFIDENCE) -> float:
    """The least margin that n seeds resolve with POWER when the true effect is the neutral value
    and one seed's effect has standard deviation `sd` (the usual t approximation of the power of a
    t test): an equivalence needs both one-sided tests to pass, w >= (t(0.95, n-1) + t(0.90, n-1))
    sd / sqrt(n); a non-inferiority margin one test, m >= (t(0.95, n-1) + t(0.80, n-1)) sd / sqrt(n).
    `confidence`: the bounds' level, if not 0.95 (a sequential claim's, analysis/sequential.py)."""
    beta = 1 - POWER
    q = 1 - beta / 2 if equivalence else 1 - beta
    return (t_quantile(n, confidence) + t_quantile(n, q)) * sd / math.sqrt(n)


def val_set_sd(val_examples: int, p: float = 0.5, terms: int = 2) -> float:
    """The sd of a signed sum of `terms` accuracies, each measured on `val_examples` validation
    examples, if the validation set were their only noise: each has variance p (1-p) / V
    (p = 0.5: the worst case). Two terms: a difference a - b; four: (a - b) - (a2 - b2)."""
    return math.sqrt(terms * p * (1 - p) / val_examples)


def resolvable_margin(n: int, val_examples: int, p: float = 0.5, equivalence: bool = True, terms: int = 2) -> float:
    """The smallest margin (in accuracy) that n seeds can show with 80% power when the true
    difference is 0, if the only noise were the validation set's (val_set_sd). Seed-to-seed
    variation only adds to it, so a margin below this is underpowered before anything runs."""
    return margin_needed(n, val_set_sd(val_examples, p, terms), equivalence)


def power(n: int, sd: float, effect: float, neutral: float, at_least=None, within=None,
          confidence: float = CONFIDENCE) -> float:
    """The chance that n seeds read "holds" (decide's rule) when the true effect is `effect` and one
    seed's effect has standard deviation `sd`, from the noncentral t: with at_least t (default the
    neutral value), P(T > t(conf, n-1)) for T ~ nct(n-1, (effect - t) sqrt(n) / sd); with within w
    (two one-sided tests around the neutral value), P(T1 > q) + P(T2 > q) - 1, the usual bound for
    TOST (T1, T2 the tests at each edge, which share the seeds' sd). NaN without a spread. (The
    survival function, not 1 - cdf: scipy's nct.cdf returns NaN at noncentralities of about 37-55,
    where sf gives 1: power(100, 1, 3.9, 0) read NaN and a TOST power there 0.)"""
    if n < 2 or not (sd > 0) or math.isnan(effect):
        return math.nan
    q, df, se = t_quantile(n, confidence), n - 1, sd / math.sqrt(n)
    if within is not None:
        lo, hi = neutral - float(within), neutral + float(within)
        p = stats.nct.sf(q, df, (effect - lo) / se) + stats.nct.sf(q, df, (hi - effect) / se) - 1
        return float(max(0.0, p))
    t = neutral if at_least is None else float(at_least)
    return float(stats.nct.sf(q, df, (effect - t) / se))


def seeds_for_power(sd: float, effect: float, neutral: float, at_least=None, within=None,
                    target: float = POWER, n_max: int = 1000) -> int | None:
    """The least number of seeds (>= 2) whose power (above) reaches `target` for `effect` at `sd`;
    None when none up to n_max does (an effect at or past the threshold never reaches it)."""
    for n in range(2, n_max + 1):
        p = power(n, sd, effect, neutral, at_least, within)
        if p >= target:
            return n
        if math.isnan(p):
            return None
    return None


def detectable(n: int, sd: float, neutral: float, at_least=None, within=None, target: float = POWER) -> float:
    """What n seeds resolve with `target` power at `sd`: with at_least t, the least true effect above
    t that reads "holds" that often; with within, the least margin that reads "holds" that often were
    the true effect the neutral value (margin_needed's question, by the noncentral t)."""
    from scipy.optimize import brentq
    if n < 2 or not (sd > 0):
        return math.nan
    se = sd / math.sqrt(n)
    if within is not None:
        return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1e3 * se))
    t = neutral if at_least is None else float(at_least)
    return float(brentq(lambda d: power(n, sd, d, neutral, at_least=t) - target, t, t + 1e3 * se))
