"""The underpowered rule and the chance count of the claims table (analysis/claims.py, stats.py), each on
both sides of its boundary, every expectation derived by hand here:

- before the runs: a margin on validation accuracy below what n seeds x V validation examples resolve
  at 80% power, validation noise alone: (t(0.95, n-1) + t(q, n-1)) sqrt(terms x 0.25 / V) / sqrt(n),
  q = 0.90 for an equivalence (`within`), 0.80 for non-inferiority (`at_least` below the neutral value);
- after the runs: an inconclusive claim with a margin below (t(0.95, n-1) + t(q, n-1)) sd / sqrt(n), sd
  the effect's measured seed-to-seed sd (at least the validation floor): seed variance counts;
- expected chance verdicts: alpha per one-sided bound, summed over the claims that went through the rule.

Quantiles (t tables): t(0.95, 2) = 2.9199856, t(0.90, 2) = 1.8856181, t(0.80, 2) = 1.0606602."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import claims  # noqa: E402

NONINF = (2.9199856 + 1.0606602) / math.sqrt(3)   # 2.2982269: one test at 80% power
TOST = (2.9199856 + 1.8856181) / math.sqrt(3)     # 2.7745166: both tests at 80% power


def figure(d: Path, effects: dict, metric="val_loss", val_size=None):
    """Figure 'f': series b at 2.0 on seeds 0-2 and, per other series, b's value minus its per-seed
    effects (val_loss: lower is better, so a positive effect = a better). val_size: a val_accuracy figure
    whose runs record that many validation examples (the pre-run floor reads it)."""
    rows = []
    for seed in range(3):
        rows.append({"series": "b", "seed": seed, "model": "0", "step": 10, "wall_s": 0, "metric": metric, metric: 0.5})
        for s, eff in effects.items():
            v = 0.5 + eff[seed] if metric == "val_accuracy" else 0.5 - eff[seed]
            rows.append({"series": s, "seed": seed, "model": "0", "step": 10, "wall_s": 0, "metric": metric, metric: v})
    pd.DataFrame(rows).to_csv(d / "f_curves.csv", index=False)
    cfg = {"workload": {"name": "imagenet", "dataset": "embedded", "val_size": val_size}} if val_size else None
    runs = [{"series": s, "seed": i} for s in ["b", *effects] for i in range(3)]
    (d / "f_runs.json").write_text(json.dumps({"panels": [metric], "runs": runs,
                                               "configs": {s: cfg for s in effects} if cfg else {}}))


def verdicts(tmp_path, effects, claim_list, **kw) -> pd.Series:
    figure(tmp_path, effects, **kw)
    doc = {"paper": "toy", "source": "t",
           "figures": {"f": {"title": "t", "kind": "curves", "scales": {"embedded": {
               "base": {"workload": {"name": "cifar"}}, "seeds": [0, 1, 2], "series": {s: {} for s in ["b", *effects]}}}}},
           "claims": [{"claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "b": "b", **c}
                      for c in claim_list]}
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    claims.read_table.cache_clear()
    claims.read_manifest.cache_clear()
    return claims.evaluate(spec, tmp_path, "embedded").set_index("id")["verdict"]


def test_non_inferiority_with_the_measured_seed_sd_on_both_sides(tmp_path):
    # effects -0.03, -0.01, -0.035: mean -0.025, sd 0.0132288 (as 0, 0.02, -0.005), half 2.9199856 sd / sqrt 3
    # = 0.0223017: bounds -0.0473017, -0.0026983. Non-inferiority at margin m needs m >= 2.2982269 sd = 0.0304027;
    # at_least -0.0303 and -0.0305 both lie inside the bounds (inconclusive), the first below what 3 seeds resolve
    sd = 0.0132288
    assert NONINF * sd == pytest.approx(0.0304027, abs=1e-6)
    v = verdicts(tmp_path, {"a": (-0.03, -0.01, -0.035)},
                 [{"id": "below", "a": "a", "at_least": -0.0303}, {"id": "above", "a": "a", "at_least": -0.0305}])
    assert v["below"] == ("underpowered: margin 0.0303 < 0.0304, the least that 3 seeds resolve at 80% power "
                          "with the effect's measured sd 0.0132")
    assert claims.verdict_kind(v["above"]) == "inconclusive"


def test_before_the_runs_validation_noise_alone_on_both_sides(tmp_path):
    # 3 seeds x 1,000 validation examples: sd of a difference sqrt(0.5 / 1000) = 0.0223607; non-inferiority
    # needs 2.2982269 x 0.0223607 = 0.0513899, an equivalence 2.7745166 x 0.0223607 = 0.0620401
    floor = math.sqrt(0.5 / 1000)
    assert (NONINF * floor, TOST * floor) == (pytest.approx(0.0513899, abs=1e-6), pytest.approx(0.0620401, abs=1e-6))
    # effects of +/-0.001 around 0 (sd 0.001 << the floor): verdicts come from the interval once the margin passes
    v = verdicts(tmp_path, {"a": (0.0, 0.001, -0.001)},
                 [{"id": "ni-below", "a": "a", "metric": "val_accuracy", "at_least": -0.0513},
                  {"id": "ni-above", "a": "a", "metric": "val_accuracy", "at_least": -0.0515},
                  {"id": "eq-below", "a": "a", "metric": "val_accuracy", "within": 0.062},
                  {"id": "eq-above", "a": "a", "metric": "val_accuracy", "within": 0.0621}],
                 metric="val_accuracy", val_size=1000)
    assert v["ni-below"] == ("underpowered: margin 0.0513 < 0.0514, the least that 3 seeds x 1000 validation "
                             "examples resolve (80% power)")
    assert v["eq-below"].startswith("underpowered: margin 0.062 < 0.062, the least that 3 seeds x 1000")
    assert v["ni-above"] == "holds" and v["eq-above"] == "holds"   # bounds -/+0.00168 inside either margin


def test_seed_variance_above_the_validation_floor_decides_after_the_runs(tmp_path):
    # 1,000 validation examples pass an equivalence margin of 0.0621 or more before the runs (floor 0.0620401),
    # but effects 0.05, 0.15, 0.1 have sd 0.05 > the floor's 0.0223607: TOST needs 2.7745166 x 0.05 = 0.1387258.
    # Bounds 0.1 -/+ 2.9199856 x 0.05 / sqrt 3 = 0.0842927: 0.0157073, 0.1842927, straddling 0.1387 and 0.1388
    assert TOST * 0.05 == pytest.approx(0.1387258, abs=1e-6)
    v = verdicts(tmp_path, {"a": (0.05, 0.15, 0.1)},
                 [{"id": "below", "a": "a", "metric": "val_accuracy", "within": 0.1387},
                  {"id": "above", "a": "a", "metric": "val_accuracy", "within": 0.1388}],
                 metric="val_accuracy", val_size=1000)
    assert v["below"] == ("underpowered: margin 0.1387 < 0.139, the least that 3 seeds resolve at 80% power "
                          "with the effect's measured sd 0.05")
    assert claims.verdict_kind(v["above"]) == "inconclusive"


def test_the_chance_count_by_hand():
    # 4 seed-based claims (2 holds, 1 inconclusive, 1 censored speedup that does not hold), 1 identity, 1 not tested
    df = pd.DataFrame({
        "verdict": ["holds", "holds", "inconclusive", "does not hold", "holds", "not tested at this scale: x"],
        "measure": ["final", "churn", "final", "speedup", "comm_ratio", "final"],
        "n": [3, 3, 5, 3, 1, 0],
        "interval_low": [0.1, 0.2, -0.1, math.nan, 4.0, math.nan]})
    assert claims.chance_counts(df) == (4, 3, pytest.approx(0.05))
    line = claims.chance_line(df)
    # holds by chance: 0.05 x 3 = 0.15; none of 3 by chance: 0.95^3 = 0.857375; does not hold: 0.05 x 4 = 0.2
    assert "4 claims went through the seed-based rule" in line
    assert "about 0.05 x 3 = 0.15 of them would still read \"holds\" by chance (1 censored speedups never can;" in line
    assert "none does, with independent claims: 0.86), and at most 0.05 x 4 = 0.2 \"does not hold\"" in line


# ------------------------------------------------------------------ issue 48: power column, inconclusive kinds
def rows(tmp_path, effects, claim_list, **kw) -> pd.DataFrame:
    verdicts(tmp_path, effects, claim_list, **kw)
    return claims.evaluate(tmp_path / "experiments.yaml", tmp_path, "embedded").set_index("id")


def test_the_power_column_is_the_noncentral_t_by_hand(tmp_path):
    """Per-seed effects 0.01, 0.03, 0.02 (mean 0.02, sd 0.01) and the paper's 0.03: the power that 3 seeds
    read "holds" (lower bound > 0) is P(T > t(0.95, 2)), T ~ nct(2, 0.03 sqrt 3 / 0.01) = nct(2, 5.196)."""
    from scipy import stats as st
    df = rows(tmp_path, {"a": [0.01, 0.03, 0.02]}, [{"id": "p", "a": "a", "paper_effect": 0.03}])
    hand = 1 - st.nct.cdf(2.9199856, 2, 0.03 * math.sqrt(3) / 0.01)
    assert hand == pytest.approx(0.9308, abs=1e-3)
    assert df.loc["p", "power"].startswith(f"{hand:.2f} for the paper's 0.03; 80% needs ")
    n = next(m for m in range(2, 100) if 1 - st.nct.cdf(st.t.ppf(0.95, m - 1), m - 1, 0.03 * math.sqrt(m) / 0.01) >= 0.8)
    assert f"80% needs {n} seeds" in df.loc["p", "power"]
    # TOST (within 0.05, the paper's effect 0): P(T1 > q) + P(T2 > q) - 1, T1 ~ nct(2, (e + w) sqrt 3 / sd),
    # T2 ~ nct(2, (w - e) sqrt 3 / sd)
    import stats
    ncp = 0.05 * math.sqrt(3) / 0.01
    tost = 2 * (1 - st.nct.cdf(2.9199856, 2, ncp)) - 1
    assert stats.power(3, 0.01, 0.0, 0.0, within=0.05) == pytest.approx(tost, abs=1e-6)
    # what the seeds resolve at 80%: the effect whose power is 0.8
    d = stats.detectable(3, 0.01, 0.0)
    assert stats.power(3, 0.01, d, 0.0) == pytest.approx(0.8, abs=1e-6)


def test_an_inconclusive_says_which_kind(tmp_path):
    """The paper's effect past one of our bounds: excluded at 95%; inside them: underpowered, with the
    power the seeds had and the seeds that give 80%; no number: says so."""
    effects = {"a": [0.02, -0.03, 0.0]}   # mean -0.0033, sd 0.0252: bounds [-0.0458, 0.0391]
    df = rows(tmp_path, effects, [{"id": "far", "a": "a", "paper_effect": 0.06},
                                  {"id": "near", "a": "a", "paper_effect": 0.03},
                                  {"id": "none", "a": "a"}])
    assert df.loc["far", "verdict"].startswith("inconclusive: the paper's effect (0.06) excluded at 95% (ours [")
    assert df.loc["near", "verdict"].startswith("inconclusive: underpowered: 3 seeds give ")
    assert "power for the paper's effect (0.03) at the measured paired sd 0.0252; " in df.loc["near", "verdict"]
    assert df.loc["none", "verdict"].startswith("inconclusive: the paper gives no number to test against")
