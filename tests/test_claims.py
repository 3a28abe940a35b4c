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
    low = 1 - stats.t_quantile(3) / math.sqrt(3)
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


def test_interpolated_steps_to_target():
    assert stats.steps_to([10, 20, 30], [3.0, 2.0, 1.0], 1.5, higher=False) == pytest.approx(25.0)
    assert stats.steps_to([10, 20], [0.2, 0.6], 0.5, higher=True) == pytest.approx(17.5)
    assert stats.steps_to([10, 20], [3.0, 2.0], 1.0, higher=False) is None


def test_underpowered_margin():
    # 3 seeds x 1,000 validation examples cannot resolve a 1-point match; 5 x 100,000 can
    assert stats.resolvable_margin(3, 1000) > 0.01
    assert stats.resolvable_margin(5, 100_000) < 0.01


# ------------------------------------------------------------------ the measures
def curves_rows(series_name, seed, model, values, metric="val_loss", every=10):
    return [{"series": series_name, "seed": seed, "model": model, "step": (i + 1) * every, "wall_s": i,
             "metric": metric, metric: v} for i, v in enumerate(values)]


@pytest.fixture
def figure_dir(tmp_path):
    """A curves figure 'f' (val_loss, lower is better) with series a, b, a2, b2 over seeds 0-2."""
    rows = []
    for seed in range(3):
        rows += curves_rows("b", seed, "0", [3.0, 2.5, 2.0, 1.8])           # best 1.8 at step 40
        rows += curves_rows("a", seed, "0", [2.8, 1.8, 1.6, 1.5 + 0.01 * seed])  # reaches 1.8 at step 20
        rows += curves_rows("a", seed, "ens", [2.0, 1.0, 1.0, 1.0])
        rows += curves_rows("b2", seed, "0", [3.0, 2.0, 1.9, 1.9])
        rows += curves_rows("a2", seed, "0", [3.0, 2.0, 1.9, 1.85])
    pd.DataFrame(rows).to_csv(tmp_path / "f_curves.csv", index=False)
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
    assert per_seed(figure_dir) == pytest.approx([1.8 - 1.5, 1.8 - 1.51, 1.8 - 1.52])   # lower loss = positive
    assert per_seed(figure_dir, a_model="ens") == pytest.approx([0.8] * 3)


def test_interaction_subtracts_the_second_pair(figure_dir):
    assert per_seed(figure_dir, a2="a2", b2="b2") == pytest.approx([0.3 - 0.05, 0.29 - 0.05, 0.28 - 0.05])


def test_speedup_counts_interpolated_steps_to_a_fixed_target(figure_dir):
    assert per_seed(figure_dir, measure="speedup") == [2.0, 2.0, 2.0]         # 40 / 20
    assert per_seed(figure_dir, measure="speedup", b_offset=40) == [4.0, 4.0, 4.0]
    # a fixed level: b reaches 2.25 half way from step 20 to 30 (25), a between 10 and 20 (~15.5)
    assert per_seed(figure_dir, measure="speedup", target=2.25)[0] == pytest.approx(25 / (10 + 10 * 0.55 / 1.0))


def test_a_censored_speedup_is_reported_not_averaged_as_zero(figure_dir):
    iv, per, reached = effects(figure_dir, measure="speedup", a="a2")        # a2 never reaches 1.8
    assert reached.startswith("0 of 3 seeds reached")
    assert list(per) == ["< 1", "< 1", "< 1"]                                 # b's 40 steps / a2's 40-step run
    assert iv.n == 0 and math.isnan(iv.mean)


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
    plateau = {"check": "b has plateaued", "quantity": "last_gain", "series": "b", "max": 0.05}
    spec.write_text(yaml.safe_dump(spec_doc(c_(regime=[plateau]), c_(id="c2", regime=[{**plateau, "max": 0.5}]))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    # b: 2.0 at step 30 -> 1.8 at 40, a gain of 0.2 over the last quarter
    assert df.loc["c1", "verdict"] == "not in the paper's regime: b has plateaued (0.2 vs <= 0.05)"
    assert "b has plateaued: 0.2 (<= 0.05) FAIL" in df.loc["c1", "regime"]
    assert df.loc["c2", "verdict"] == "holds" and "pass" in df.loc["c2", "regime"]


def test_full_scale_only_claims_are_not_tested(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(full_scale_only="needs 128 workers to saturate"))))
    df = claims.evaluate(spec, figure_dir, "embedded")
    assert df["verdict"].iloc[0] == "not tested at this scale: needs 128 workers to saturate"


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
    assert "2 claims: 1 holds, 1 does not hold, 0 inconclusive" in (out / "c.md").read_text()
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
    assert side.loc["A", "val_loss ours mean"] == pytest.approx(1.51)
    assert side.loc["A", "val_loss ours sd"] == pytest.approx(0.01)
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


def test_an_equivalence_margin_below_the_resolvable_one_is_underpowered(figure_dir, tmp_path):
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    manifest["runs"] = [{"series": "a", "seed": s} for s in range(3)]
    manifest["configs"] = {"a": {"workload": {"val_size": 1000}}}
    (figure_dir / "f_runs.json").write_text(json.dumps(manifest))
    claims.read_manifest.cache_clear()
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump(spec_doc(c_(metric="val_accuracy", within=0.01))))
    df = claims.evaluate(spec, figure_dir, "embedded").set_index("id")
    need = stats.resolvable_margin(3, 1000)          # 0.0439: 1 point cannot be shown with 3 x 1,000
    assert df.loc["c1", "verdict"] == (f"underpowered: margin 0.01 < {need:.3g}, the least that 3 seeds x 1000 "
                                       f"validation examples resolve")
