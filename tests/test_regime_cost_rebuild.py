"""The committed regime costs are what the code makes of the committed inputs (issue 52, mutants C02,
P01, P05, P08): results/bench/regime_cost.csv rebuilt by benchmarks/regime_cost.py from
replications/*/experiments.yaml and the measured rates is the committed file, cell for cell; the
claims table's regime_cost column is analysis.claims.cost_texts of that file, and evaluate puts it
on the claims that carry one. A malformed experiments.yaml is one line naming it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis import claims
from benchmarks import regime_cost

ROOT = Path(__file__).resolve().parents[1]
COSTS = ROOT / "results" / "bench" / "regime_cost.csv"
CLAIMS = ROOT / "results" / "embedded" / "claims.csv"


def committed_costs() -> dict[tuple[str, str], str]:
    """(paper, id) -> the committed claims.csv's regime_cost, where it has one."""
    df = pd.read_csv(CLAIMS, keep_default_na=False)
    return {(r.paper, r.id): r.regime_cost for r in df.itertuples() if r.regime_cost}


def test_regime_cost_csv_rebuilt_from_the_code_is_the_committed_one(tmp_path, capsys):
    out = tmp_path / "new" / "bench"   # a folder not yet made, two levels down
    assert regime_cost.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()   # the table it wrote, one line a claim under its header
    assert printed[0].split() == ["paper", "claim", "cpu_bound", "cpu_h_2cores", "gpu_bound", "gpu_h_one"]
    rebuilt, committed = pd.read_csv(out / "regime_cost.csv"), pd.read_csv(COSTS)
    assert [line.split()[:2] for line in printed[1:]] == [[p, c] for p, c in zip(committed.paper, committed.claim)]
    assert not list(out.glob("*.tmp"))
    assert list(zip(rebuilt.paper, rebuilt.claim)) == list(zip(committed.paper, committed.claim))
    for col in committed.columns:   # name the first differing cell of each column before the byte check
        differ = [(p, c, a, b) for p, c, a, b in zip(committed.paper, committed.claim, committed[col], rebuilt[col])
                  if not (a == b or (pd.isna(a) and pd.isna(b)))]
        assert not differ, f"{col}: committed vs rebuilt: {differ[:3]}"
    assert (out / "regime_cost.csv").read_text() == COSTS.read_text()
    # a rerun into the folder it made (results/bench exists on every rerun) replaces the file with the same bytes
    assert regime_cost.main(["--out", str(out)]) == 0
    capsys.readouterr()
    assert (out / "regime_cost.csv").read_text() == COSTS.read_text()


def test_help_says_what_the_script_writes(capsys):
    with pytest.raises(SystemExit) as e:
        regime_cost.main(["--help"])
    assert e.value.code == 0
    words = " ".join(capsys.readouterr().out.split())   # argparse wraps the description to the terminal
    assert " ".join(regime_cost.__doc__.splitlines()[0].split()) in words


def test_the_claims_regime_cost_column_is_cost_texts_of_the_committed_csv():
    have = committed_costs()
    assert len(have) >= 10
    made = {(paper, cid): text for paper in {p for p, _ in have} for cid, text in claims.cost_texts(COSTS, paper).items()}
    assert {k: made.get(k) for k in have} == have


def test_evaluate_puts_each_claims_regime_cost_on_it():
    """Through evaluate (the column analysis/claims.py fills), on the paper whose claims carry the most costs."""
    have = committed_costs()
    paper = max({p for p, _ in have}, key=lambda p: sum(k[0] == p for k in have))
    df = claims.evaluate(ROOT / "replications" / paper / "experiments.yaml", ROOT / "results" / "embedded" / paper,
                         "embedded", COSTS)
    got = dict(zip(df["id"], df["regime_cost"]))
    assert {k: got.get(k[1]) for k in have if k[0] == paper} == {k: v for k, v in have.items() if k[0] == paper}


@pytest.mark.parametrize("text", ["claims: [", "[1, 2]", "paper: sun2016\nclaims: 5\n"])
def test_a_malformed_experiments_yaml_is_one_line_naming_it(tmp_path, capsys, text):
    """N24: regime_cost.py on a malformed experiments.yaml gave a 19-26-line traceback."""
    replications = tmp_path / "replications"
    shutil.copytree(ROOT / "replications", replications)
    bad = replications / "anil2018" / "experiments.yaml"
    bad.write_text(text)
    assert regime_cost.main(["--out", str(tmp_path / "out"), "--replications", str(replications)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"regime_cost: {bad}: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out" / "regime_cost.csv").exists()
