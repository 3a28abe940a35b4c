"""Results at a glance: the summary figure's paper values, the compact claims table, the README's
RESULTS block (current with the committed claims.csv) and the `_paper` tables' paper columns."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "embedded"
sys.path.insert(0, str(ROOT / "analysis"))
import claims  # noqa: E402
import figure_data  # noqa: E402
import paper_effect  # noqa: E402
import paper_table  # noqa: E402
import plot_claims_summary as summary  # noqa: E402


@pytest.fixture(scope="module")
def specs():
    return summary.load_specs(figure_data.REPLICATIONS, ["anil2018", "sodhani2020", "sun2016"])


def claim(specs, paper, cid):
    return next(c for c in specs[paper].claims if c.id == cid)


def test_paper_effects_come_from_the_experiments_files_numbers(specs):
    derived = paper_effect.derived
    # Sun CIFAR-10, K = 4 rows: EC-DNN G 8.43% vs MA-DNN G 10.3% error -> accuracy gain 0.0187
    assert derived(claim(specs, "sun2016", "cifar10-K4"), specs["sun2016"]) == pytest.approx(0.0187)
    # Anil Table 1: log loss 0.4458 (codistilled) vs 0.4480 (DNN), lower is better -> +0.0022
    assert derived(claim(specs, "anil2018", "table1-loss"), specs["anil2018"]) == pytest.approx(0.0022)
    # churn 0.029 (DNN) - 0.019 (codistilled)
    assert derived(claim(specs, "anil2018", "table1-churn"), specs["anil2018"]) == pytest.approx(0.010)
    assert derived(claim(specs, "sun2016", "speed-imagenet"), specs["sun2016"]) == 2.24   # "up to 2.24x"
    assert derived(claim(specs, "anil2018", "sec3.4.1"), specs["anil2018"]) == 2.7       # "27k / ~10k = 2.7x"
    # the paper's words only: nothing derived; "~2x fewer steps" is stated as the claim's paper_effect
    assert derived(claim(specs, "anil2018", "fig2a-steps"), specs["anil2018"]) is None
    assert summary.paper_effect(claim(specs, "anil2018", "fig2a-steps"), specs["anil2018"]) == 2.0
    assert summary.paper_effect(claim(specs, "sun2016", "communication-K4"), specs["sun2016"]) is None
    assert summary.paper_effect(claim(specs, "sun2016", "ablation-E-K4"), specs["sun2016"]) is None   # no E-DNN number


def test_a_stated_paper_effect_agrees_with_the_files_numbers(specs):
    """A claim's `paper_effect` (the power column's effect) is typed by hand: where the experiments file
    also holds the paper's numbers (rows, a speedup's text), the two must agree."""
    both = 0
    for paper, spec in specs.items():
        for c in spec.claims:
            d = paper_effect.derived(c, spec)
            if c.paper_effect is not None and d is not None:
                both += 1
                assert c.paper_effect == pytest.approx(d, abs=1e-9), (paper, c.id)
    assert both >= 15


def test_the_compact_table_has_every_claim_in_one_short_line():
    df = pd.read_csv(RESULTS / "claims.csv")
    table = claims.compact_table(df, details="claims.md").splitlines()
    assert table[0] == "| paper | claim | paper's number | ours [one-sided 95% bounds] | verdict |"
    assert len(table) == 2 + len(df)
    assert all(len(line) < 400 for line in table), max(table, key=len)
    line = next(x for x in table if "`speed-cifar10-K4`" in x)   # a censored speedup: its upper bound only
    assert "0.624 [none, 0.823]" in line and "regime not established (1 of 3 regime checks shown, 2 design facts, paper tier)" in line
    line = next(x for x in table if "`fig2a-loss`" in x)   # fresh data is a design fact, never counted as a check
    assert "not in the paper's regime (1 of 3 regime checks shown, 1 design fact)" in line


def test_each_row_says_which_data_its_verdict_stands_on():
    df = pd.read_csv(RESULTS / "claims.csv").set_index("id")
    assert df.loc["fig1-clean", "data"] == "generated (imagenet stand-in)"
    assert df.loc["table1-loss", "data"] == "generated (ctr stand-in)"
    assert pd.isna(df.loc["fig2a-smoothing", "data"])   # not tested: no data
    assert claims.data_of({"configs": {"a": {"workload": {"name": "cifar", "dataset": "fashion_mnist"}}}}, "a") == \
        "real: Fashion-MNIST"
    assert claims.data_of({"configs": {}}, "a") == ""
    row = {"verdict": "holds", "data": "real: Fashion-MNIST"}
    assert claims.verdict_text(row) == "holds (real data: Fashion-MNIST)"
    assert claims.verdict_text({**row, "data": "generated (cifar stand-in)"}) == "holds"
    sentence = summary.data_sentence(pd.DataFrame({"data": ["generated (x stand-in)", "real: CIFAR-10", ""]}))
    assert sentence.startswith("Data: 1 of the 2 tested claims stand on data codist generates (a stand-in), 1 on a real")


def test_claims_md_keeps_the_long_text_in_its_details():
    text = claims.markdown(pd.read_csv(RESULTS / "claims.csv"), "h")
    head, details = text.split("\n## Details\n", 1)
    assert "2 workers folded into one rank" not in head and "2 workers folded into one rank" in details
    assert '<a id="sun2016-speed-cifar10-k4"></a>' in details and "(#sun2016-speed-cifar10-k4)" in head


def test_the_readme_block_is_current_with_the_committed_claims():
    block = summary.readme_block(pd.read_csv(RESULTS / "claims.csv"))
    readme = (ROOT / "README.md").read_text()
    assert block in readme, "README's RESULTS block is stale: python analysis/plot_claims_summary.py --claims " \
                            "results/embedded/claims.csv --readme README.md"
    assert readme.index(block) < readme.index("## Quick start")
    assert (RESULTS / "claims.png").exists()


@pytest.mark.parametrize("table", sorted(RESULTS.glob("*/*_paper.csv")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_paper_table_row_has_a_paper_number_or_says_why_not(table):
    df = pd.read_csv(table)
    paper_cols = [c for c in df.columns if c.endswith(" paper")]
    for _, r in df.iterrows():
        given = any(not pd.isna(r[c]) for c in paper_cols)
        assert given or str(r["paper source"]).startswith("none"), (table.name, r["row"])


def test_a_row_without_a_paper_number_reads_none_with_a_reason():
    manifest = {"paper": "toy", "figure": "f", "scale": "embedded", "title": "t", "columns": ["val_loss"],
                "rows": [{"label": "A", "series": "a", "val_loss": 1.4, "source": "Table 9"},
                         {"label": "B", "series": "b"}]}
    vals = pd.DataFrame([{"row": "A", "series": "a", "model": "0", "column": "val_loss", "seed": "0", "value": 1.5},
                         {"row": "B", "series": "b", "model": "0", "column": "val_loss", "seed": "0", "value": 1.6}])
    side = paper_table.side_by_side(manifest, vals)
    assert list(side["paper source"]) == ["Table 9", paper_table.NO_PAPER]
    md = paper_table.markdown(manifest, side)
    assert "| none " in md and "| 1.4 " in md
