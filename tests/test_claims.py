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
import paper_table  # noqa: E402


def series(values):
    return pd.Series(values, index=range(len(values)), dtype=float)


# ------------------------------------------------------------------ the verdict rule
@pytest.mark.parametrize("values, verdict", [
    ([0.10, 0.11, 0.12], "holds"),            # m = 0.11, se = 0.00577: low 0.0985 > 0
    ([-0.10, -0.11, -0.12], "does not hold"),  # high < 0
    ([0.10, -0.05, 0.02], "inconclusive"),     # the interval holds 0
    ([0.10, 0.11], "inconclusive"),            # fewer than 3 seeds
])
def test_better_claims(values, verdict):
    v, rule, m, s, low, high = claims.verdict(series(values), 0.0, None, None)
    assert v == verdict and rule == "effect > 0"
    assert m == pytest.approx(sum(values) / len(values))
    if len(values) > 1:
        se = pd.Series(values).std(ddof=1) / math.sqrt(len(values))
        assert (low, high) == (pytest.approx(m - 2 * se), pytest.approx(m + 2 * se))


def test_threshold_and_ratio_claims():
    x = series([1.5, 1.6, 1.7])                  # se = 0.0577; low = 1.4845
    assert claims.verdict(x, 1.0, None, None)[0] == "holds"           # speedup > 1
    assert claims.verdict(x, 1.0, 1.45, None)[0] == "holds"
    assert claims.verdict(x, 1.0, 1.6, None)[0] == "inconclusive"
    assert claims.verdict(x, 1.0, 2.0, None)[0] == "does not hold"    # high 1.7155 < 2


@pytest.mark.parametrize("values, within, verdict", [
    ([0.001, -0.002, 0.0], 0.01, "holds"),        # |m| + 2 se well inside 0.01
    ([0.05, 0.06, 0.055], 0.01, "does not hold"),  # |m| - 2 se = 0.0492 > 0.01
    ([0.0, 0.02, -0.005], 0.01, "inconclusive"),
])
def test_match_claims(values, within, verdict):
    assert claims.verdict(series(values), 0.0, None, within)[0] == verdict


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


def effects(figure_dir, **claim):
    manifest = json.loads((figure_dir / "f_runs.json").read_text())
    return claims.effects({"a": "a", "b": "b", **claim}, "f", manifest, figure_dir)


def test_final_difference_is_oriented_by_the_metric(figure_dir):
    x = effects(figure_dir, measure="final")
    assert list(x) == pytest.approx([1.8 - 1.5, 1.8 - 1.51, 1.8 - 1.52])   # lower loss = positive
    ens = effects(figure_dir, measure="final", a_model="ens")
    assert list(ens) == pytest.approx([0.8] * 3)


def test_interaction_subtracts_the_second_pair(figure_dir):
    x = effects(figure_dir, measure="final", a2="a2", b2="b2")
    assert list(x) == pytest.approx([0.3 - 0.05, 0.29 - 0.05, 0.28 - 0.05])


def test_speedup_counts_steps_to_the_baseline_best(figure_dir):
    assert list(effects(figure_dir, measure="speedup")) == [2.0, 2.0, 2.0]         # 40 / 20
    assert list(effects(figure_dir, measure="speedup", b_offset=40)) == [4.0, 4.0, 4.0]
    never = effects(figure_dir, measure="speedup", a="a2")                           # a2 never reaches 1.8
    assert list(never) == [0.0, 0.0, 0.0]


def test_comm_ratio_is_baseline_total_over_between_group(figure_dir):
    assert list(effects(figure_dir, measure="comm_ratio")) == [100.0] * 3


def test_claims_file_errors_name_the_claim(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump({"paper": "toy", "figures": {}, "claims": [
        {"id": "c1", "claim": "x", "figure": "f", "basis": "vibes", "measure": "final", "a": "a", "b": "b"}]}))
    with pytest.raises(claims.ClaimError, match="claim 'c1': basis: 'vibes'"):
        claims.evaluate(spec, figure_dir, "embedded")
    spec.write_text(yaml.safe_dump({"paper": "toy", "figures": {}, "claims": [
        {"id": "c2", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "a": "zz", "b": "b"}]}))
    with pytest.raises(claims.ClaimError, match="claim 'c2'.*'zz'"):
        claims.evaluate(spec, figure_dir, "embedded")


def test_evaluate_and_cli_write_the_table(figure_dir, tmp_path):
    spec = tmp_path / "experiments.yaml"
    spec.write_text(yaml.safe_dump({"paper": "toy", "figures": {}, "claims": [
        {"id": "fast", "claim": "a is faster", "figure": "f", "basis": "step-matched", "measure": "speedup",
         "a": "a", "b": "b", "paper": "2x"},
        {"id": "same", "claim": "a matches b", "figure": "f", "basis": "device-matched", "measure": "final",
         "a": "a", "b": "b", "within": 0.01}]}))
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
