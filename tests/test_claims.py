"""analysis/claims.py and paper_table.py on hand-made figure tables in the pipeline's formats:
the verdict rule at its boundaries, each measure's per-seed effect, and table values."""
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
import stats  # noqa: E402
from schema import Claim  # noqa: E402
import paper_table  # noqa: E402


def series(values):
    return pd.Series(values, index=range(len(values)), dtype=float)


# ------------------------------------------------------------------ the verdict rule
def decide(values, neutral=0.0, at_least=None, within=None):
    return stats.decide(stats.t_interval(series(values)), neutral, at_least, within)[0]


@pytest.mark.parametrize("values, verdict", [
    ([0.10, 0.11, 0.12], "holds"),            # m = 0.11, se = 0.00577: low = 0.11 - 2.92 se = 0.0931 > 0
    ([-0.10, -0.11, -0.12], "does not hold"),  # high < 0
    ([0.10, -0.05, 0.02], "inconclusive"),     # the interval holds 0
    ([0.10, 0.11], "inconclusive"),            # fewer than 3 seeds
])
def test_better_claims(values, verdict):
    assert decide(values) == verdict
    iv = stats.t_interval(series(values))
    assert iv.mean == pytest.approx(sum(values) / len(values))
    se = pd.Series(values).std(ddof=1) / math.sqrt(len(values))
    t = {3: 2.919986, 2: 6.313752}[len(values)]          # t(0.95, n-1), from tables
    assert (iv.low, iv.high) == (pytest.approx(iv.mean - t * se, rel=1e-6), pytest.approx(iv.mean + t * se, rel=1e-6))
    assert f"t(0.95, {len(values) - 1})" in iv.method


def test_t_interval_at_its_boundary():
    # mean 1, sd 1, n = 3: low = 1 - 2.919986 / sqrt(3) = -0.6859; holds just below, not just above
    x = [0.0, 1.0, 2.0]
    low = 1 - 2.9199856 / math.sqrt(3)
    assert decide(x, at_least=low - 1e-6) == "holds"
    assert decide(x, at_least=low + 1e-6) == "inconclusive"
    # the old mean - 2 se rule would have said "holds" at -0.2 (1 - 2/sqrt(3) = -0.155): t(0.95, 2) does not
    assert decide(x, at_least=-0.2) == "inconclusive"


def test_threshold_and_ratio_claims():
    x = [1.5, 1.6, 1.7]                  # se = 0.0577; t se = 0.1686: low = 1.4314, high 1.7686
    assert decide(x, 1.0) == "holds"
    assert decide(x, 1.0, 1.42) == "holds"
    assert decide(x, 1.0, 1.45) == "inconclusive"
    assert decide(x, 1.0, 1.8) == "does not hold"


@pytest.mark.parametrize("values, within, verdict", [
    ([0.001, -0.002, 0.0], 0.01, "holds"),        # both bounds inside +/- 0.01
    ([0.05, 0.06, 0.055], 0.01, "does not hold"),  # the whole interval above 0.01
    ([0.0, 0.02, -0.005], 0.01, "inconclusive"),
])
def test_match_claims(values, within, verdict):
    assert decide(values, within=within) == verdict


def test_churn_with_one_outlier_seed_does_not_hold():
    # the effect is large only in the two pairs with seed 2 (an outlier seed): the 3 pairs taken as
    # independent values would "hold" (low = 0.2367 - 2.92 x 0.0684 = 0.037 > 0); resampled at the
    # seed level (leave one seed out) the bound is 0.2367 - 2.92 x 0.1368 < 0
    pairs = {("0", "1"): 0.10, ("0", "2"): 0.30, ("1", "2"): 0.31}
    assert stats.decide(stats.t_interval(pd.Series(list(pairs.values()))), 0.0)[0] == "holds"
    iv = stats.jackknife_interval(pairs)
    assert iv.n == 3 and "jackknife" in iv.method
    assert stats.decide(iv, 0.0)[0] == "inconclusive"
    # three seeds that agree do hold
    agree = {("0", "1"): 0.10, ("0", "2"): 0.11, ("1", "2"): 0.12}
    assert stats.decide(stats.jackknife_interval(agree), 0.0)[0] == "holds"


# ------------------------------------------------------------------ the measures
def curves_rows(series_name, seed, model, values, metric="val_loss", every=10):
    return [{"series": series_name, "seed": seed, "model": model, "step": (i + 1) * every, "wall_s": i,
             "metric": metric, metric: v} for i, v in enumerate(values)]


SHIFT = (0.0, -0.06, -0.03)   # each seed's shift of the final values (seed 0 keeps b's best level at 1.8)


@pytest.fixture
def figure_dir(tmp_path):
    """A curves figure 'f' (val_loss, lower is better) with series a, b, a2, b2, noisy, short over
    seeds 0-2, a table f.csv (bytes) and f_values.csv (churn per pair of seeds). Every seed shifts the
    final values of b, a, noisy and shifted by its own SHIFT (a seed effect the arms share, as common
    random numbers do), so the paired effects are the same on every seed's level, and a claim that set
    a's seed against another seed's b would see the shifts' spread (0.06) instead."""
    rows = []
    for seed in range(3):
        d = SHIFT[seed]
        # reaches 1.8 at step 40 on every seed, then ends at 1.8 + d (step 50)
        rows += curves_rows("b", seed, "0", [3.0, 2.5, 2.0, 1.8, 1.8 + d])
        rows += curves_rows("a", seed, "0", [2.8, 1.8, 1.6, 1.5 + 0.01 * seed + d])  # reaches 1.8 at step 20
        rows += curves_rows("a", seed, "ens", [2.0, 1.0, 1.0, 1.0])
        rows += curves_rows("b2", seed, "0", [3.0, 2.0, 1.9, 1.9])
        rows += curves_rows("a2", seed, "0", [3.0, 2.0, 1.9, 1.85])
        rows += curves_rows("noisy", seed, "0", [3.0, 2.5, 2.0, 1.8 + d - (0.0, 0.02, -0.005)[seed]])
        rows += curves_rows("shifted", seed, "0", [3.0, 2.5, 2.0, 1.8 + d - (0.03, 0.05, 0.025)[seed]])
        # never reaches 1.8, in runs of 80, 70 and 50 steps: b's 40 steps bound its ratio by 0.5, 0.571, 0.8
        rows += curves_rows("short", seed, "0", [3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3][:(8, 7, 5)[seed]])
    pd.DataFrame(rows).to_csv(tmp_path / "f_curves.csv", index=False)
    pd.DataFrame([{"series": s, "seed": pair, "column": "churn", "value": v}
                  for s, values in (("b", (0.30, 0.30, 0.30)), ("a", (0.20, 0.19, 0.18)))
                  for pair, v in zip(("0-1", "0-2", "1-2"), values)]).to_csv(tmp_path / "f_values.csv", index=False)
    table = pd.DataFrame([{"series": s, "seed": seed, "comm_sent_bytes_per_rank_per_update": c,
                           "between_group_sent_bytes_per_rank_per_update": g}
                          for seed in range(3) for s, c, g in (("a", 1100.0, 10.0), ("b", 1000.0, 0.0))])
    table.to_csv(tmp_path / "f.csv", index=False)
    (tmp_path / "f_runs.json").write_text(json.dumps({"paper": "toy", "figure": "f", "panels": ["val_loss"],
                                                      "series": ["a", "b", "a2", "b2"], "runs": []}))
    return tmp_path


def claim(**kw):
    return Claim.model_validate({"id": "c", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final",
                                 "a": "a", "b": "b", **kw})


def effects(figure_dir, **kw):
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    return claims.effects(claim(**kw), manifest, figure_dir)


def per_seed(figure_dir, **kw):
    return list(effects(figure_dir, **kw)[1])


def test_final_difference_is_oriented_by_the_metric(figure_dir):
    # lower loss = positive, each seed's a against the same seed's b (the shared shift cancels)
    assert per_seed(figure_dir) == pytest.approx([1.8 - 1.5, 1.8 - 1.51, 1.8 - 1.52])
    # the ensemble ends at 1.0 on every seed: the effect carries b's own seed shift
    assert per_seed(figure_dir, a_model="ens") == pytest.approx([0.8, 0.74, 0.77])


def test_interaction_subtracts_the_second_pair(figure_dir):
    assert per_seed(figure_dir, a2="a2", b2="b2") == pytest.approx([0.3 - 0.05, 0.29 - 0.05, 0.28 - 0.05])


def test_speedup_counts_interpolated_steps_to_a_fixed_target(figure_dir):
    assert per_seed(figure_dir, measure="speedup") == [2.0, 2.0, 2.0]         # 40 / 20
    assert per_seed(figure_dir, measure="speedup", b_offset=40) == [4.0, 4.0, 4.0]
    # a fixed level: b reaches 2.25 half way from step 20 to 30 (25), a between 10 and 20 (~15.5)
    assert per_seed(figure_dir, measure="speedup", target=2.25)[0] == pytest.approx(25 / (10 + 10 * 0.55 / 1.0))


def test_a_one_seed_speedup_reports_its_target(figure_dir):
    curves = pd.read_csv(figure_dir / "f_curves.csv")
    curves[curves["seed"] == 0].to_csv(figure_dir / "f_curves.csv", index=False)
    iv, per, reached = effects(figure_dir, measure="speedup")
    assert (reached, list(per), iv.n) == ("1 of 1 seeds reached 1.8", [2.0], 1)     # b's best 1.8: 40 / 20 steps


def test_a_censored_speedup_is_reported_not_averaged_as_zero(figure_dir):
    iv, per, reached = effects(figure_dir, measure="speedup", a="a2")        # a2 never reaches 1.8
    assert reached.startswith("0 of 3 seeds reached")
    assert list(per) == ["< 1", "< 1", "< 1"]                                 # b's 40 steps / a2's 40-step run
    # the bounds (1, 1, 1) bound the mean ratio from above only; 1 is not below 1: no verdict
    assert iv.n == 3 and math.isnan(iv.low) and iv.high == pytest.approx(1.0)


def test_censored_speedups_through_the_verdict(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="slow", measure="speedup", a="short"),
                                            c_(id="edge", measure="speedup", a="a2"),
                                            c_(id="mixed", measure="speedup", a="short", b_offset=80))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    # bounds 40/80, 40/70, 40/50 = 0.5, 0.5714286, 0.8: mean 0.6238095, squared deviations 0.0491157,
    # sd 0.1567093, high = 0.6238095 + 2.9199856 x 0.1567093 / sqrt 3 = 0.8879987 < 1
    assert df.loc["slow", "verdict"] == "does not hold"
    assert df.loc["slow", "interval_high"] == pytest.approx(0.8879987, abs=1e-6)
    assert math.isnan(df.loc["slow", "interval_low"]) and "censored upper bounds" in df.loc["slow", "method"]
    assert claims.verdict_kind(df.loc["edge", "verdict"]) == "inconclusive"        # bounds exactly 1: not below it
    # with 80 steps added to b's the bounds are 1.5, 1.714, 2.4: above 1, but a bound never holds
    assert claims.verdict_kind(df.loc["mixed", "verdict"]) == "inconclusive"


def test_a_censored_seeds_bound_is_b_steps_plus_the_offset_over_as_run_length(figure_dir):
    """Issue 52, mutant R09 (regime.speedups' censored_bound): a seed whose a never reaches the target
    has a ratio below (b's steps + b_offset) / a's run length. "short" never reaches 1.8 in runs of
    80, 70 and 50 steps; b reaches it at step 40; with 80 steps added to b's, the bounds are 120 / 80,
    120 / 70 and 120 / 50, and the interval is their one-sided 95% upper bound (no lower one)."""
    from scipy import stats as st
    iv, per, reached = effects(figure_dir, measure="speedup", a="short", b_offset=80)
    assert reached.startswith("0 of 3 seeds reached") and list(per) == ["< 1.5", "< 1.71", "< 2.4"]
    bounds = pd.Series([120 / 80, 120 / 70, 120 / 50])
    assert iv.mean == pytest.approx(bounds.mean()) and math.isnan(iv.low)
    assert iv.high == pytest.approx(bounds.mean() + st.t.ppf(0.95, 2) * bounds.std() / 3 ** 0.5)


def test_comm_ratio_without_a_threshold_must_exceed_one(figure_dir, tmp_path):
    # b sends 1000 bytes per rank per update; a, c, d send 500, 1000, 2000 between groups: ratios 2, 1, 0.5
    pd.DataFrame([{"series": s, "seed": seed, "comm_sent_bytes_per_rank_per_update": 1000.0,
                   "between_group_sent_bytes_per_rank_per_update": g}
                  for seed in range(3) for s, g in (("a", 500.0), ("b", 0.0), ("c", 1000.0), ("d", 2000.0))]
                 ).to_csv(figure_dir / "f.csv", index=False)
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(*[c_(id=a, measure="comm_ratio", a=a) for a in "acd"])))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert list(df["effect_mean"]) == [2.0, 1.0, 0.5] and list(df["effect_sd"]) == [0.0] * 3   # bytes: no noise
    assert list(df["verdict"]) == ["holds", "does not hold", "does not hold"]   # the neutral 1, strictly above
    assert set(df["rule"]) == {"effect > 1"}


def test_comm_ratio_at_the_papers_own_period_through_the_verdict(figure_dir, tmp_path):
    # the measured messages (P = 1000 B) at Sodhani's 16-GPU all-reduce (2 x 15/16 P per update) vs codistillation
    # reading the other model every 2,500 updates (P / 2500): 2 x 15/16 x 2500 = 4687.5, one exact value
    pd.DataFrame([{"series": "ar", "seed": 0, "comm_sent_bytes_per_rank_per_update": 1000.0},
                  {"series": "cd", "seed": 0, "between_group_sent_bytes_per_rank_per_update": 1000.0 / 16}]
                 ).to_csv(figure_dir / "f.csv", index=False)
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["configs"] = {
        "ar": {"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 2, "models": 1}},
        "cd": {"algorithm": {"name": "codistill", "exchange_every": 16}, "parallel": {"world_size": 2, "models": 2}}}
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    identity = {"a": {"algorithm": "codistill", "models": 2, "period": 2500}, "b": {"algorithm": "allreduce", "ranks": 16}}
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="id", measure="comm_ratio", a="cd", b="ar", identity=identity,
                                               at_least=4687))))
    row = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    assert (row["n"], row["effect_mean"], row["interval_low"], row["interval_high"]) == (1, 4687.5, 4687.5, 4687.5)
    assert row["effect_sd"] == 0.0                                                  # exact: no spread
    assert (row["verdict"], row["per_seed"]) == ("holds", "identity: 4688")


def test_comm_ratio_verdict_at_its_threshold(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(*[c_(id=f"t{i}", measure="comm_ratio", at_least=t)
                                              for i, t in enumerate((99.9, 100.0, 100.1))])))
    df = claims.evaluate(spec, figure_dir, "embedded")
    assert list(df["verdict"]) == ["holds", "does not hold", "does not hold"]   # 1000 / 10 = 100, strictly above
    assert list(df["rule"]) == ["effect > 99.9", "effect > 100", "effect > 100.1"]


def test_churn_difference_through_the_verdict(figure_dir, tmp_path):
    # churn(b) - churn(a) per pair: 0.10, 0.11, 0.12; leave-one-seed-out low = 0.11 - 0.0337171 = 0.0762829
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="lo", measure="churn", at_least=0.0762), c_(
        id="hi", measure="churn", at_least=0.0764))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert df.loc["lo", "per_seed"] == "0-1: 0.1; 0-2: 0.11; 1-2: 0.12"
    assert df.loc["lo", "interval_low"] == pytest.approx(0.0762829, abs=1e-6)
    assert (df.loc["lo", "verdict"], claims.verdict_kind(df.loc["hi", "verdict"])) == ("holds", "inconclusive")


def test_an_unresolvable_margin_is_underpowered_only_when_inconclusive(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    # noisy: effects 0, 0.02, -0.005 (mean 0.005, sd 0.0132288, half 2.9199856 sd / sqrt 3 = 0.0223017: bounds
    # -0.0173017, 0.0273017). TOST needs 2.7745166 sd = 0.0367 > 0.01; non-inferiority 2.2982269 sd = 0.0304 >
    # 0.015, but at -0.02 it holds (low > -0.02) and power does not undo it. a: effects 0.30, 0.29, 0.28 (sd 0.01)
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="tost", a="noisy", within=0.01),
                                            c_(id="noninf", a="noisy", at_least=-0.015),
                                            c_(id="noninf-holds", a="noisy", at_least=-0.02),
                                            c_(id="lucky", a="noisy", within=0.03),
                                            c_(id="below", a="shifted", within=0.0367),
                                            c_(id="above", a="shifted", within=0.0368),
                                            c_(id="powered", within=0.3),
                                            c_(id="superiority", a="noisy"))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert df.loc["tost", "verdict"] == ("underpowered: margin 0.01 < 0.0367, the least that 3 seeds resolve at 80% "
                                         "power with the effect's measured sd 0.0132")
    assert df.loc["noninf", "verdict"].startswith("underpowered: margin 0.015 < 0.0304,")
    assert df.loc["noninf-holds", "verdict"] == "holds"
    assert df.loc["lucky", "verdict"] == "holds"     # bounds inside +/- 0.03: a holds is not undone by low power
    # shifted: effects 0.03, 0.05, 0.025 (the same sd, mean 0.035: bounds 0.0127, 0.0573): inconclusive at
    # either margin, underpowered just below the 0.0367034 it needs, a fair non-result just above
    assert df.loc["below", "verdict"].startswith("underpowered: margin 0.0367 < 0.0367,")
    assert claims.verdict_kind(df.loc["above", "verdict"]) == "inconclusive"
    # mean 0.29, half 0.0168585: high 0.3068585 > 0.3, and 0.3 is resolvable: inconclusive, not underpowered
    assert claims.verdict_kind(df.loc["powered", "verdict"]) == "inconclusive"
    assert claims.verdict_kind(df.loc["superiority", "verdict"]) == "inconclusive"   # no margin: no power statement


def test_comm_ratio_is_baseline_total_over_between_group(figure_dir):
    assert per_seed(figure_dir, measure="comm_ratio") == [100.0] * 3


def spec_doc(*claims_):
    return {"paper": "toy", "figures": {"f": {"title": "t", "kind": "curves", "scales": {
        "embedded": {"base": {"seed": 0}, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}},
        "claims": list(claims_)}


def c_(**kw):
    return {"id": "c1", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "a": "a", "b": "b",
            **kw}


def test_claims_file_errors_name_the_claim(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(basis="vibes"))))
    with pytest.raises(ValueError, match=r"(?s)experiments.yaml:.*claim 'c1' \(claims.0\), basis: Input should be"):
        claims.evaluate(spec, figure_dir, "embedded")
    spec.write_text(yaml.safe_dump(spec_doc(c_(a="zz"))))
    with pytest.raises(claims.ClaimError, match="claim 'c1'.*'zz'"):
        claims.evaluate(spec, figure_dir, "embedded")


def test_a_failed_regime_check_gives_no_verdict(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    plateau = {"check": "b has plateaued", "source": "Fig. 9: 'b stops improving'", "quantity": "last_gain",
               "series": "b", "max": 0.02}
    spec.write_text(yaml.safe_dump(spec_doc(c_(regime=[plateau]), c_(id="c2", regime=[{**plateau, "max": 0.5}]),
                                            c_(id="c3", regime=[{**plateau, "max": 0.05}]))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    # b's last-quarter gains: 0.08 on average (1.85 at step 37.5 -> 1.77 at 50), [0.0294, 0.1306] over 3 seeds
    assert df.loc["c1", "verdict"] == ("not in the paper's regime: b has plateaued: 0.08 [0.02942, 0.1306] over 3 "
                                       "seeds vs <= 0.02")
    assert "b has plateaued: 0.08 [0.02942, 0.1306] over 3 seeds (<= 0.02): refuted" in df.loc["c1", "regime"]
    assert df.loc["c2", "verdict"] == "holds" and df.loc["c2", "regime"].endswith(": shown")
    # the bound straddles 0.05: no verdict, and how many seeds would settle it
    assert df.loc["c3", "verdict"].startswith("regime not established: b has plateaued: 0.08 [0.02942, 0.1306] over "
                                              "3 seeds vs <= 0.05; about ")
    assert json.loads(df.loc["c3", "regime_checks"])[0]["state"] == "not established"
    md = claims.markdown(df.reset_index(), "toy")
    assert "- **b has plateaued** (toy c1, toy c2, toy c3). Source: Fig. 9: 'b stops improving'" in md


def test_a_regime_check_that_cannot_be_measured_is_a_claim_error(figure_dir, tmp_path):
    gate = {"check": "gate", "source": "s", "quantity": "value", "metric": "bleu", "min": 0}
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(regime=[gate]))))
    with pytest.raises(claims.ClaimError, match=r"experiments.yaml: claim 'c1': regime check 'gate': metric 'bleu'"):
        claims.evaluate(spec, figure_dir, "embedded")


def test_a_regime_check_without_a_source_fails_the_plan(tmp_path):
    sys.path.insert(0, str(ROOT / "workflows"))
    from experiments import ExperimentsError, load_plan
    spec = tmp_path / "toy" / "experiments.yaml"
    spec.parent.mkdir()
    check = {"check": "b has plateaued", "quantity": "last_gain", "series": "b", "max": 0.05}
    doc = spec_doc(c_(regime=[{**check, "source": "Fig. 9"}]))
    doc["figures"]["f"]["scales"]["embedded"]["base"] = {"workload": {"name": "cifar"}, "launch": {"device": "cpu"},
                                                         "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5}}
    spec.write_text(yaml.safe_dump(doc))
    assert load_plan(tmp_path, "embedded")
    doc["claims"] = [c_(regime=[check])]
    spec.write_text(yaml.safe_dump(doc))
    with pytest.raises(ExperimentsError) as e:
        load_plan(tmp_path, "embedded")
    assert str(e.value) == (f"{spec}: claim 'c1' (claims.0), regime.0.source: missing: every regime check needs a "
                            "source (the paper's sentence, figure or table it operationalises, and where its "
                            "threshold comes from)")


def test_a_design_fact_outside_its_bounds_fails_the_plan_and_is_never_a_passed_check(figure_dir, tmp_path):
    """Issue 48: what the configuration fixes (here the exchange count) is validated before any run, and a
    claims row lists it as design, never among the checks it counts."""
    sys.path.insert(0, str(ROOT / "workflows"))
    from experiments import ExperimentsError, load_plan
    spec = tmp_path / "toy" / "experiments.yaml"
    spec.parent.mkdir()
    rounds = {"check": "at least 2 averaging rounds", "source": "s", "quantity": "rounds", "series": "a", "min": 2}
    doc = spec_doc(c_(regime=[rounds]))
    doc["figures"]["f"]["scales"]["embedded"]["base"] = {
        "workload": {"name": "cifar"}, "launch": {"device": "cpu"}, "parallel": {"world_size": 2, "models": 2},
        "algorithm": {"name": "model_average", "tau": 5}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5}}
    spec.write_text(yaml.safe_dump(doc))
    assert load_plan(tmp_path, "embedded")                     # 10 / 5 = 2 rounds
    spec.write_text(yaml.safe_dump({**doc, "claims": [c_(regime=[{**rounds, "min": 3}])]}))
    with pytest.raises(ExperimentsError, match=r"claim 'c1': design fact 'at least 2 averaging rounds' is 2 at scale "
                                               r"'embedded', outside its bounds"):
        load_plan(tmp_path, "embedded")
    # in the claims table: listed under design, not counted among the regime checks
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["configs"] = {"a": doc["figures"]["f"]["scales"]["embedded"]["base"]}
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    plateau = {"check": "b has plateaued", "source": "s", "quantity": "last_gain", "series": "b", "max": 0.5}
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(regime=[rounds, plateau]))))
    r = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    assert r["design"] == "at least 2 averaging rounds: 2 (>= 2): design" and "averaging" not in r["regime"]
    assert claims.regime_status(r) == "1 of 1 regime checks shown, 1 design fact"
    spec.write_text(yaml.safe_dump(spec_doc(c_(regime=[{**rounds, "min": 3}, plateau]))))
    r = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    assert r["verdict"] == "not in the paper's regime: at least 2 averaging rounds: 2 vs >= 3 (design)"


def test_full_scale_only_claims_are_not_tested(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(full_scale_only="needs 128 workers to saturate"))))
    df = claims.evaluate(spec, figure_dir, "embedded")
    assert df["verdict"].iloc[0] == "not tested at this scale: needs 128 workers to saturate"


def test_speedup_offset_by_another_series_steps(figure_dir, tmp_path):
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["configs"] = {"b2": {"train": {"steps": 40}}}
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(measure="speedup", b_offset="@b2"), c_(id="c2", measure="speedup",
                                                                                       b_offset="@zz"))))
    with pytest.raises(claims.ClaimError, match=r"claim 'c2': b_offset '@zz': .* no config for series 'zz'; have \['b2'\]$"):
        claims.evaluate(spec, figure_dir, "embedded")
    spec.write_text(yaml.safe_dump(spec_doc(c_(measure="speedup", b_offset="@b2"))))
    assert claims.evaluate(spec, figure_dir, "embedded")["per_seed"].iloc[0] == "0: 4; 1: 4; 2: 4"   # (40 + 40) / 20


def test_evaluate_and_cli_write_the_table(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(
        c_(id="fast", claim="a is faster", measure="speedup", paper="2x"),
        c_(id="same", claim="a matches b", basis="device-matched", within=0.01))))
    out = tmp_path / "out"
    assert claims.main(["--paper", str(spec), "--figures", str(figure_dir), "--csv", str(out / "c.csv"),
                        "--markdown", str(out / "c.md")]) == 0
    df = pd.read_csv(out / "c.csv")
    assert list(df["verdict"]) == ["holds", "does not hold"]   # speedup 2.0 on every seed; gap 0.29 > 0.01
    assert list(df["metric"]) == ["val_loss", "val_loss"]      # no metric named: the figure's first panel
    md = (out / "c.md").read_text()
    assert "2 claims: 1 holds, 1 does not hold, 0 inconclusive" in md
    assert "2 claims went through the seed-based rule" in md and "about 0.05 x 2 = 0.1 of them" in md
    assert claims.main(["--combine", str(out / "c.csv"), str(out / "c.csv"), "--csv", str(out / "all.csv"),
                        "--markdown", str(out / "all.md")]) == 0
    assert len(pd.read_csv(out / "all.csv")) == 4


# ------------------------------------------------------------------ paper-vs-ours tables
def test_paper_table_puts_paper_numbers_beside_our_seed_statistics(figure_dir):
    manifest = {"paper": "toy", "figure": "f", "scale": "embedded", "title": "t", "runs": [],
                "columns": ["val_loss", "comm_bytes_per_update"],
                "rows": [{"label": "A", "series": "a", "model": "0", "val_loss": 1.4, "source": "Table 9"},
                         {"label": "B", "series": "b"}]}
    vals = paper_table.values(manifest, pd.read_csv(figure_dir / "f.csv"), pd.read_csv(figure_dir / "f_curves.csv"))
    side = paper_table.side_by_side(manifest, vals).set_index("row")
    assert side.loc["A", "val_loss paper"] == 1.4 and side.loc["A", "paper source"] == "Table 9"
    assert side.loc["A", "val_loss ours mean"] == pytest.approx(1.51 + sum(SHIFT) / 3)   # a ends at 1.5 + 0.01 seed + SHIFT
    assert side.loc["A", "val_loss ours sd"] == pytest.approx(math.sqrt(0.0014 / 2))   # 1.5, 1.45, 1.49: deviations 0.02, -0.03, 0.01
    assert side.loc["A", "val_loss n"] == 3
    assert side.loc["B", "comm_bytes_per_update ours mean"] == 1000.0
    assert pd.isna(side.loc["B", "val_loss paper"])


def test_table_and_bar_figures_are_drawn(figure_dir, tmp_path):
    import plot_bars
    import plot_table
    manifest = {"paper": "toy", "figure": "f", "scale": "embedded", "title": "t", "runs": [],
                "columns": ["val_loss"], "series": ["a", "b"], "panels": ["val_loss"],
                "reference": [{"what": "a beats b", "source": "Fig. 9"}],
                "rows": [{"label": "A", "series": "a", "val_loss": 1.4}, {"label": "B", "series": "b"}]}
    curves, table = pd.read_csv(figure_dir / "f_curves.csv"), pd.read_csv(figure_dir / "f.csv")
    plot_table.plot(manifest, paper_table.values(manifest, table, curves), tmp_path / "t.png")
    plot_bars.plot(manifest, table.assign(metric="val_loss"), curves, tmp_path / "b.png")
    for name in ("t.png", "b.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def accuracy_figure(root: Path, workload: dict, scale: str, seeds: int = 3, train: dict | None = None) -> Path:
    """Figure 'f' on val_accuracy at `scale`: a ends 0.001, -0.001, 0 above b (seeds 0-2, or the first
    `seeds` of them), a's config has `workload` (and `train`); returns the experiments file's folder."""
    rows = []
    for seed in range(seeds):
        rows += curves_rows("b", seed, "0", [0.3, 0.5], metric="val_accuracy")
        rows += curves_rows("a", seed, "0", [0.3, 0.5 + (0.001, -0.001, 0.0)[seed]], metric="val_accuracy")
    pd.DataFrame(rows).to_csv(root / "f_curves.csv", index=False)
    (root / "f_runs.json").write_text(json.dumps({
        "paper": "toy", "figure": "f", "panels": ["val_accuracy"], "series": ["a", "b"],
        "runs": [{"series": s, "seed": seed} for s in "ab" for seed in range(seeds)],
        "configs": {"a": {"workload": workload, **({"train": train} if train else {})}}}))
    doc = spec_doc()
    doc["figures"]["f"]["scales"] = {scale: doc["figures"]["f"]["scales"]["embedded"]}
    return doc


@pytest.mark.parametrize("scale, workload, margins", [
    # 3 seeds x 1,000 validation examples: TOST needs 2.7745166 x sqrt(0.5 / 1000) = 0.0620401 (the old comment's
    # 0.0439 is 2,000 examples' value); non-inferiority 2.2982269 x sqrt(0.5 / 1000) = 0.0513899
    ("embedded", {"name": "imagenet", "dataset": "embedded", "val_size": 1000},
     {"within": (0.0620, 0.0621, "0.062"), "at_least": (-0.0513, -0.0515, "0.0514")}),
    # full scale: ImageNet's 50,000 validation images, not the embedded default val_size it still carries:
    # 2.7745166 x sqrt(0.5 / 50000) = 0.0087738
    ("full", {"name": "imagenet", "dataset": "imagefolder", "data_dir": "imagenet", "val_size": 1000},
     {"within": (0.0087, 0.0088, "0.00877"), "at_least": (-0.0071, -0.0073, "0.00727")}),
])
def test_a_margin_below_what_the_validation_set_resolves_is_underpowered(tmp_path, scale, workload, margins,
                                                                        eval_size=None, v=None):
    figures = tmp_path / "fig"
    figures.mkdir()
    doc = accuracy_figure(figures, workload, scale, train={"eval_size": eval_size} if eval_size else None)
    claims.read_manifest.cache_clear()
    claims.read_table.cache_clear()
    v = v or (1000 if scale == "embedded" else 50000)
    for key, (under, enough, need) in margins.items():
        doc["claims"] = [c_(id="under", metric="val_accuracy", **{key: under}),
                         c_(id="enough", metric="val_accuracy", **{key: enough})]
        spec = tmp_path / "experiments.yaml"
        spec.write_text(yaml.safe_dump(doc))
        df = claims.evaluate(spec, figures, scale).set_index("id")
        assert df.loc["under", "verdict"] == (f"underpowered: margin {abs(under):g} < {need}, the least that 3 seeds x "
                                              f"{v} validation examples resolve (80% power)")
        assert df.loc["enough", "verdict"] == "holds"     # effects 0.001, -0.001, 0: bounds +/- 0.0016858


@pytest.mark.parametrize("eval_size, v, margins", [
    # a full-scale run that evaluates on a slice of 1,000 of ImageNet's 50,000 images has 1,000's floor
    (1000, 1000, {"within": (0.0620, 0.0621, "0.062"), "at_least": (-0.0513, -0.0515, "0.0514")}),
    # a slice larger than the set (or 0, the whole set) leaves the set's own floor
    (80000, 50000, {"within": (0.0087, 0.0088, "0.00877"), "at_least": (-0.0071, -0.0073, "0.00727")}),
])
def test_the_validation_floor_counts_the_evaluation_slice(tmp_path, eval_size, v, margins):
    test_a_margin_below_what_the_validation_set_resolves_is_underpowered(
        tmp_path, "full", {"name": "imagenet", "dataset": "imagefolder", "data_dir": "imagenet"}, margins,
        eval_size=eval_size, v=v)


def test_the_validation_floor_applies_from_two_seeds(tmp_path):
    """2 seeds x 1,000 validation examples: TOST needs (t(0.95, 1) + t(0.90, 1)) x sqrt(0.5 / 1000) / sqrt 2 =
    (6.3137515 + 3.0776835) x 0.0223607 / 1.4142136 = 0.1484934 before anything runs; one seed has no
    sd, so no floor: its claim is inconclusive (fewer than 3 seeds), not underpowered."""
    for seeds, margin, verdict in ((2, 0.1484, "underpowered: margin 0.1484 < 0.148, the least that 2 seeds x 1000 "
                                               "validation examples resolve (80% power)"),
                                   (2, 0.1486, "inconclusive"), (1, 0.5, "inconclusive")):
        figures = tmp_path / f"fig{seeds}-{margin}"
        figures.mkdir()
        doc = accuracy_figure(figures, {"name": "imagenet", "dataset": "embedded", "val_size": 1000}, "embedded",
                              seeds)
        doc["claims"] = [c_(id="m", metric="val_accuracy", within=margin)]
        spec = figures / "experiments.yaml"
        spec.write_text(yaml.safe_dump(doc))
        v = claims.evaluate(spec, figures, "embedded").loc[0, "verdict"]
        assert v == verdict or (verdict == "inconclusive" and claims.verdict_kind(v) == verdict)


@pytest.mark.parametrize("how", ["a run missing", "a NaN final value"])
def test_a_lost_seed_makes_the_verdict_incomplete_not_silently_fewer(figure_dir, tmp_path, how):
    """Seeds 0-3 planned for a and b: with seed 3's b run missing, or its final value NaN, the claim
    reads 'incomplete: 3 of 4', never a verdict from the 3 seeds left (which alone would hold)."""
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["runs"] = [{"series": s, "seed": seed} for s in ("a", "b") for seed in range(4)]
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    curves = pd.read_csv(figure_dir / "f_curves.csv")
    extra = pd.DataFrame(curves_rows("a", 3, "0", [2.8, 1.8, 1.6, 1.5]) + (
        curves_rows("b", 3, "0", [3.0, 2.5, 2.0, float("nan")]) if how == "a NaN final value" else []))
    pd.concat([curves, extra]).to_csv(figure_dir / "f_curves.csv", index=False)
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="lost"))))
    row = claims.evaluate(spec, figure_dir, "embedded").set_index("id").loc["lost"]
    assert row["verdict"] == "incomplete: 3 of 4 planned seeds usable (seed 3: a run missing or a non-finite value)"
    assert claims.verdict_kind(row["verdict"]) == "incomplete"
    # the same table without the planned seed 3: all 3 seeds used, and the effect 0.29-0.30 holds
    manifest["runs"] = [r for r in manifest["runs"] if r["seed"] != 3]
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()   # read once per process; this test rewrote it
    assert claims.evaluate(spec, figure_dir, "embedded").set_index("id").loc["lost", "verdict"] == "holds"


@pytest.mark.parametrize("tier", ["paper", "decisive"])
def test_a_paper_tier_figure_without_tables_is_not_tested_in_this_tier_below_full_scale(tmp_path, tier):
    """Only a figure of another tier (paper, decisive) whose tables are absent below the full scale reads
    'not tested in this tier', naming its tier and command; the same figure at the full scale, or a
    default-tier one, is missing tables: an error."""
    figures = tmp_path / "figs"
    figures.mkdir()                                   # no f_runs.json: nothing ran
    doc = spec_doc(c_(id="p"), c_(id="why", full_scale_only="needs 64 ranks"))
    scales = doc["figures"]["f"]["scales"]
    scales["full"] = scales["embedded"]
    doc["figures"]["f"]["tier"] = tier
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    df = claims.evaluate(spec, figures, "embedded").set_index("id")
    assert df.loc["p", "verdict"] == (f"not tested in this tier: figure 'f' is in the {tier} tier "
                                      f"(make replicate TIER={tier})")
    assert df.loc["why", "verdict"] == "not tested at this scale: needs 64 ranks"
    assert (df.loc["p", "tier"], df.loc["why", "tier"]) == ("", "")
    assert (df.loc["p", "seeds"], df.loc["why", "seeds"]) == ("", "")
    assert df.loc["why", "n"] == 0 and math.isnan(df.loc["p", "n"])              # nothing measured
    with pytest.raises(claims.ClaimError, match=r"claim 'p': figure 'f' has no .*f_runs.json at scale 'full'"):
        claims.evaluate(spec, figures, "full")
    doc["figures"]["f"]["tier"] = "default"
    spec.write_text(yaml.safe_dump(doc))
    with pytest.raises(claims.ClaimError, match=r"claim 'p': figure 'f' has no .*f_runs.json at scale 'embedded'"):
        claims.evaluate(spec, figures, "embedded")


@pytest.mark.parametrize("tier", ["paper", "decisive"])
def test_a_paper_tier_figure_with_its_tables_is_judged(figure_dir, tmp_path, tier):
    doc = spec_doc(c_(id="p"))
    doc["figures"]["f"]["tier"] = tier
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    row = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    assert (row["verdict"], row["tier"], row["seeds"]) == ("holds", tier, "declared")   # effects 0.30, 0.29, 0.28
    assert claims.verdict_text(row).startswith("holds (") and f"{tier} tier" in claims.verdict_text(row)


def test_the_validation_floor_of_a_claim_without_a_metric_is_its_first_panels(tmp_path):
    # the claim names no metric; the figure's first panel is val_accuracy (its second val_loss): 3 seeds x 1,000
    # examples need 0.0620401
    figures = tmp_path / "figs"
    figures.mkdir()
    doc = accuracy_figure(figures, {"name": "imagenet", "dataset": "embedded", "val_size": 1000}, "embedded")
    manifest = json.loads((figures / "f_runs.json").read_text())
    manifest["runs"] += [{"series": "c", "seed": seed} for seed in range(5)]    # another series' seeds: not a's
    (figures / "f_runs.json").write_text(json.dumps({**manifest, "panels": ["val_accuracy", "val_loss"]}))
    doc["claims"] = [c_(id="m", within=0.062)]
    spec = figures / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    row = claims.evaluate(spec, figures, "embedded").loc[0]
    assert row["verdict"].startswith("underpowered: margin 0.062 < 0.062, the least that 3 seeds x 1000 validation "
                                     "examples resolve")
    assert row["metric"] == "val_accuracy"


def test_the_validation_floor_at_its_boundary_and_for_an_interaction(tmp_path):
    """3 seeds x 1,000 examples: a difference a - b has sd sqrt(2 x 0.25 / 1000) = 0.0223607, TOST needs
    (t(0.95, 2) + t(0.90, 2)) x 0.0223607 / sqrt 3 = 0.0620401: a margin exactly that is resolvable (the effects
    0.001, -0.001, 0 then hold), the next float below is not. An interaction (a - b) - (a2 - b2) has 4 terms:
    sd sqrt(4 x 0.25 / 1000) = 0.0316228, need 2.7745166 x 0.0316228 = 0.0877383."""
    from scipy.stats import t
    figures = tmp_path / "figs"
    figures.mkdir()
    doc = accuracy_figure(figures, {"name": "imagenet", "dataset": "embedded", "val_size": 1000}, "embedded")
    need = (float(t.ppf(0.95, 2)) + float(t.ppf(0.9, 2))) * math.sqrt(2 * 0.5 * 0.5 / 1000) / math.sqrt(3)
    assert need == pytest.approx(0.0620401, abs=1e-7)
    doc["claims"] = [c_(id="at", metric="val_accuracy", within=need),
                     c_(id="below", metric="val_accuracy", within=math.nextafter(need, 0)),
                     c_(id="ia-under", metric="val_accuracy", a2="a", b2="b", within=0.0877),
                     c_(id="ia-enough", metric="val_accuracy", a2="a", b2="b", within=0.0878)]
    spec = figures / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    df = claims.evaluate(spec, figures, "embedded").set_index("id")
    assert df.loc["at", "verdict"] == "holds"
    assert df.loc["below", "verdict"].startswith("underpowered: margin 0.0620401 < 0.062, the least that 3 seeds")
    assert df.loc["ia-under", "verdict"] == ("underpowered: margin 0.0877 < 0.0877, the least that 3 seeds x 1000 "
                                             "validation examples resolve (80% power)")
    assert df.loc["ia-enough", "verdict"] == "holds"       # (a - b) - (a - b) = 0 on every seed


def test_a_margin_exactly_at_what_the_seeds_resolve_is_not_underpowered(figure_dir, tmp_path):
    # final val_loss of b 5 and a 4.5, 3.5, 2.5: effects 0.5, 1.5, 2.5 (mean 1.5, sd exactly 1), bounds 1.5 -/+
    # 2.9199856 / sqrt 3 = -0.1858, 3.1858: inconclusive within w = (t(0.95, 2) + t(0.90, 2)) x 1 / sqrt 3 =
    # (2.9199856 + 1.8856181) / 1.7320508 = 2.7745166, the least margin 3 seeds resolve: resolvable at it
    from scipy.stats import t
    rows = []
    for seed in range(3):
        rows += curves_rows("b", seed, "0", [5.0]) + curves_rows("a", seed, "0", [4.5 - seed])
    pd.DataFrame(rows).to_csv(figure_dir / "f_curves.csv", index=False)
    claims.read_table.cache_clear()
    need = (float(t.ppf(0.95, 2)) + float(t.ppf(0.9, 2))) * 1.0 / math.sqrt(3)
    assert need == pytest.approx(2.7745166, abs=1e-7)
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="at", within=need), c_(id="below", within=math.nextafter(need, 0)))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert claims.verdict_kind(df.loc["at", "verdict"]) == "inconclusive"
    assert df.loc["below", "verdict"].startswith("underpowered: margin 2.77452 < 2.77, the least that 3 seeds resolve")


def test_no_validation_size_no_floor(tmp_path):
    # a's config names no val_size: no floor, so within 0.01 is judged (effects 0.001, -0.001, 0: bounds +/- 0.0016858)
    figures = tmp_path / "figs"
    figures.mkdir()
    doc = accuracy_figure(figures, {"name": "imagenet", "dataset": "embedded"}, "embedded")
    doc["claims"] = [c_(id="m", metric="val_accuracy", within=0.01)]
    spec = figures / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    assert claims.evaluate(spec, figures, "embedded").loc[0, "verdict"] == "holds"


def test_the_validation_floor_is_for_accuracy_differences_only(figure_dir, tmp_path):
    # a's config names 1,000 validation examples, but the claim is on val_loss: no floor (it would need
    # 2.7745166 x sqrt(0.5 / 1000) / sqrt 3 = 0.0358 > 0.02). Effects 0.30, 0.29, 0.28: bounds 0.2731, 0.3069 lie
    # outside +/- 0.02
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["runs"] = [{"series": s, "seed": seed} for s in ("a", "b") for seed in range(3)]
    manifest["configs"] = {"a": {"workload": {"name": "imagenet", "dataset": "embedded", "val_size": 1000}}}
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="loss", within=0.02))))
    assert claims.evaluate(spec, figure_dir, "embedded").loc[0, "verdict"] == "does not hold"


def test_a_final_difference_of_a_higher_is_better_metric_keeps_its_size(tmp_path):
    figures = tmp_path / "figs"
    figures.mkdir()
    doc = accuracy_figure(figures, {"name": "imagenet", "dataset": "embedded", "val_size": 1000}, "embedded")
    doc["claims"] = [c_(id="m", metric="val_accuracy")]
    spec = figures / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    row = claims.evaluate(spec, figures, "embedded").iloc[0]
    assert row["per_seed"] == "0: 0.001; 1: -0.001; 2: 0"            # a - b, accuracy: higher is better


def test_the_comparison_names_the_second_pair_and_its_weight(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="w1", a2="a2", b2="b2"), c_(id="w2", a2="a2", b2="b2", weight2=2),
                                            c_(id="half", a2="a2", b2="b2", weight2=0.5), c_(id="one"))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert list(df["comparison"]) == ["a vs b minus (a2 vs b2)", "a vs b minus 2 x (a2 vs b2)",
                                      "a vs b minus 0.5 x (a2 vs b2)", "a vs b"]


# ------------------------------------------------------------------ issues 41 and 42
def test_only_seeds_keeps_a_pair_only_when_both_seeds_are_declared():
    df = pd.DataFrame({"seed": ["0-1", "0-5", "5-6", "1", "5"], "value": range(5)})
    assert list(claims.only_seeds(df, [0, 1, 2])["seed"]) == ["0-1", "1"]    # "0-5": seed 5 is not declared
    assert list(claims.only_seeds(df, None)["seed"]) == list(df["seed"])


def test_churn_reads_only_the_pairs_of_declared_seeds(figure_dir, tmp_path):
    # a fourth retrain (seed 3) beside the declared 0-2: its pairs with declared seeds must not count
    vals = pd.read_csv(figure_dir / "f_values.csv")
    extra = pd.DataFrame([{"series": s, "seed": pair, "column": "churn", "value": v}
                          for s, v in (("b", 0.30), ("a", 0.60)) for pair in ("0-3", "1-3", "2-3")])
    pd.concat([vals, extra]).to_csv(figure_dir / "f_values.csv", index=False)
    manifest = {"panels": ["val_loss"], "runs": [], "declared_seeds": [0, 1, 2]}
    iv, per, _ = claims.effects(claim(measure="churn"), manifest, figure_dir, seeds=[0, 1, 2])
    assert sorted(per.index) == ["0-1", "0-2", "1-2"] and list(per) == pytest.approx([0.10, 0.11, 0.12])


def test_a_paired_claims_interval_equals_a_hand_computation(figure_dir, tmp_path):
    """Issue 37: the interval of a paired claim, by hand from its per-seed differences with scipy's t. The
    fixture's arms share each seed's shift, so only pairing by seed gives these differences: a's finals
    1.5, 1.45, 1.49 against b's 1.8, 1.74, 1.77 (unpaired, the spread of the means would be 3x as wide)."""
    from scipy import stats as st
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_())))
    row = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    d = [1.8 - 1.5, 1.74 - 1.45, 1.77 - 1.49]            # b - a: lower loss is better
    n, mean = 3, sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = st.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    assert (row["n"], row["effect_mean"], row["effect_sd"]) == (3, pytest.approx(mean), pytest.approx(sd))
    assert (row["interval_low"], row["interval_high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert row["per_seed"] == "0: 0.3; 1: 0.29; 2: 0.28"


def test_a_metric_without_a_direction_takes_the_claims(figure_dir):
    curves = pd.read_csv(figure_dir / "f_curves.csv")
    curves["init_distance"] = curves["val_loss"]
    curves.to_csv(figure_dir / "f_curves.csv", index=False)
    with pytest.raises(ValueError, match="no better direction"):
        per_seed(figure_dir, metric="init_distance")
    assert per_seed(figure_dir, metric="init_distance", direction="lower") == pytest.approx([0.3, 0.29, 0.28])
    assert per_seed(figure_dir, metric="init_distance", direction="higher") == pytest.approx([-0.3, -0.29, -0.28])


def test_a_wall_time_speedup_counts_training_seconds(figure_dir):
    # b reaches 1.8 at its 4th evaluation (step 40, wall_s 3), a at its 2nd (step 20, wall_s 1)
    assert per_seed(figure_dir, measure="speedup") == [2.0, 2.0, 2.0]
    assert per_seed(figure_dir, measure="speedup", clock="wall_s") == [3.0, 3.0, 3.0]


def test_a_claim_no_scale_runs_is_not_tested_and_needs_no_runs(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(a="no such series", not_run="no n > 2 series anywhere"))))
    row = claims.evaluate(spec, figure_dir, "embedded").iloc[0]
    assert row["verdict"] == "not tested at this scale: no scale of this harness runs it: no n > 2 series anywhere"
    assert row["regime_sources"] == "" and math.isnan(row["effect_mean"])


def test_only_a_claim_tested_here_names_its_regime_checks_sources(figure_dir, tmp_path):
    """Issue 52, mutant C06 (claims.regime_sources): the regime_sources column lists [check, source]
    of a claim's regime checks only where a scale of this harness tests the claim: a full-scale-only
    claim or one no scale runs carries its checks in experiments.yaml but shows none, and a claim
    without checks shows none."""
    plateau = {"check": "b has plateaued", "source": "Fig. 9: 'b stops improving'", "quantity": "last_gain",
               "series": "b", "max": 0.5}
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(id="tested", regime=[plateau]), c_(id="bare"),
                                            c_(id="full", regime=[plateau], full_scale_only="needs 128 workers"),
                                            c_(id="never", regime=[plateau], not_run="no n > 2 series anywhere"))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    assert json.loads(df.loc["tested", "regime_sources"]) == [["b has plateaued", "Fig. 9: 'b stops improving'"]]
    assert (df.loc["bare", "regime_sources"], df.loc["full", "regime_sources"], df.loc["never", "regime_sources"]) \
        == ("", "", "")


@pytest.mark.parametrize("tier", ["default", "paper"])
def test_a_claim_no_scale_runs_needs_no_tables_in_any_tier(tmp_path, tier):
    """Issue 52, mutant C08 (claims.evaluate's `if c.not_run:` and the `not c.not_run` beside it): a
    claim no scale of this harness runs reads 'no scale of this harness runs it' (its reason) whether or
    not its figure has tables and whatever the figure's tier, and never asks for the tables a claim
    tested here would (a default-tier figure without them is an error for such a claim: the control)."""
    figures = tmp_path / "figs"
    figures.mkdir()                                   # no f_runs.json: nothing ran
    doc = spec_doc(c_(id="never", not_run="no n > 2 series anywhere"))
    doc["figures"]["f"]["tier"] = tier
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    row = claims.evaluate(spec, figures, "embedded").set_index("id").loc["never"]
    assert row["verdict"] == "not tested at this scale: no scale of this harness runs it: no n > 2 series anywhere"
    assert (row["tier"], row["seeds"], row["regime_sources"]) == ("", "", "")
    if tier == "default":
        doc["claims"].append(c_(id="tested"))
        spec.write_text(yaml.safe_dump(doc))
        with pytest.raises(claims.ClaimError, match=r"claim 'tested': figure 'f' has no .*f_runs.json"):
            claims.evaluate(spec, figures, "embedded")


def test_another_tiers_claim_is_stopped_by_a_check_read_on_a_figure_that_ran(figure_dir, tmp_path):
    """Figure 'g' (paper tier) never ran; its claims' checks that read figure 'f' (which ran) decide
    them when one is refuted or not established (the rule's step 3: no run of 'g' could give a
    verdict), with f's tier and seeds; a shown one, or a check that reads 'g' itself (or whose `over`
    does), leaves 'not tested in this tier'."""
    doc = spec_doc()
    doc["figures"]["g"] = {**doc["figures"]["f"], "tier": "paper"}
    plateau = {"check": "b has plateaued", "source": "Fig. 9: 'b stops improving'", "quantity": "last_gain",
               "series": "b", "figure": "f", "max": 0.02}
    own = {**plateau, "check": "g's b has plateaued", "figure": "g"}
    over_own = {**plateau, "check": "over g", "over": {"quantity": "difference", "series": "a", "b": "b", "figure": "g"}}
    doc["claims"] = [c_(id="refuted", figure="g", regime=[plateau]),
                     c_(id="unsettled", figure="g", regime=[{**plateau, "max": 0.05}]),
                     c_(id="shown", figure="g", regime=[{**plateau, "max": 0.5}]),
                     c_(id="own", figure="g", regime=[own, over_own])]
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    note = " (read on figure f's runs; figure g, in the paper tier, was not run: no run of it could give a verdict until this is shown)"
    # b's last-quarter gains on f: 0.08 [0.02942, 0.1306] over 3 seeds (test_a_failed_regime_check_gives_no_verdict)
    assert df.loc["refuted", "verdict"] == ("not in the paper's regime: b has plateaued: 0.08 [0.02942, 0.1306] over 3 "
                                            "seeds vs <= 0.02" + note)
    assert df.loc["unsettled", "verdict"].startswith("regime not established: b has plateaued: 0.08 [0.02942, 0.1306] "
                                                     "over 3 seeds vs <= 0.05; about ")
    assert df.loc["unsettled", "verdict"].endswith(note)
    assert json.loads(df.loc["unsettled", "regime_checks"])[0]["state"] == "not established"
    assert (df.loc["refuted", "tier"], df.loc["refuted", "seeds"]) == ("default", "declared")
    assert "b has plateaued: 0.08 [0.02942, 0.1306] over 3 seeds (<= 0.02): refuted" == df.loc["refuted", "regime"]
    for cid in ("shown", "own"):
        assert df.loc[cid, "verdict"] == "not tested in this tier: figure 'g' is in the paper tier (make replicate TIER=paper)"
        assert df.loc[cid, "tier"] == ""


def test_a_refuted_check_elsewhere_outranks_an_unsettled_one_and_absent_tables_are_skipped(figure_dir, tmp_path):
    """Of another tier's claim's checks on other figures, a refuted one decides the verdict (as step 3:
    "not in the paper's regime", naming only the refuted), one on a figure with no tables here (h, also
    of another tier) is left out of the row, and the claim's tier is that of the figure read."""
    doc = spec_doc()
    doc["figures"]["g"] = {**doc["figures"]["f"], "tier": "paper"}
    doc["figures"]["h"] = {**doc["figures"]["f"], "tier": "decisive"}
    plateau = {"check": "b has plateaued", "source": "s", "quantity": "last_gain", "series": "b", "figure": "f"}
    doc["claims"] = [c_(id="both", figure="g", regime=[{**plateau, "check": "on h", "figure": "h", "max": 0.5},
                                                         {**plateau, "check": "loose", "max": 0.05},
                                                         {**plateau, "check": "tight", "max": 0.02}])]
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(doc))
    row = claims.evaluate(spec, figure_dir, "embedded").set_index("id").loc["both"]
    assert row["verdict"].startswith("not in the paper's regime: tight: 0.08 [0.02942, 0.1306] over 3 seeds vs <= 0.02 (read")
    assert "loose" not in row["verdict"] and "on h" not in row["regime"]
    assert [c["check"] for c in json.loads(row["regime_checks"])] == ["loose", "tight"]
    assert row["tier"] == "default"
