"""The statistics every claim uses: a one-sided t interval over seeds, the seed-level jackknife
for pairwise measures (churn), interpolated steps-to-target with censoring, the verdict rule and
the smallest equivalence margin n seeds and a validation set can resolve.

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
    on the far side of the mean. Fewer than MIN_SEEDS: inconclusive."""
    if within is not None:
        rule = f"abs(effect - {neutral:g}) <= {within:g}"
        if iv.n < MIN_SEEDS or math.isnan(iv.low):
            return "inconclusive", rule
        lo, hi = neutral - within, neutral + within
        if lo <= iv.low and iv.high <= hi:
            return "holds", rule
        if iv.low > hi or iv.high < lo:
            return "does not hold", rule
        return "inconclusive", rule
    t = neutral if at_least is None else float(at_least)
    rule = f"effect > {t:g}"
    if iv.n < MIN_SEEDS or math.isnan(iv.low):
        return "inconclusive", rule
    return ("holds" if iv.low > t else "does not hold" if iv.high < t else "inconclusive"), rule


def resolvable_margin(n: int, val_examples: int, p: float = 0.5) -> float:
    """The smallest equivalence margin (in accuracy) that n seeds can show with 80% power when
    the true difference is 0, if the only noise were the validation set's: the difference of two
    accuracies on `val_examples` has sd sqrt(2 p (1-p) / V) (p = 0.5: the worst case), and the two
    one-sided tests need w >= (t(0.95, n-1) + t(0.90, n-1)) x sd / sqrt(n). Seed-to-seed
    variation only adds to it, so a margin below this is underpowered before anything runs."""
    sd = math.sqrt(2 * p * (1 - p) / val_examples)
    return (t_quantile(n) + t_quantile(n, 1 - (1 - POWER) / 2)) * sd / math.sqrt(n)
