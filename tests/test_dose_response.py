"""analysis/dose_response.py: the pre-stated rule's three answers on constructed per-seed errors, the
paper's numbers read from the real experiments.yaml, and one clear line for bad input."""
from pathlib import Path

import pandas as pd
import pytest

from analysis import dose_response as dr

ROOT = Path(__file__).resolve().parents[1]
SUN = ROOT / "replications/sun2016/experiments.yaml"


def values(tmp_path, errors):
    """errors: {(algo, size, model): [error_pct per seed]} -> a paper_table-style _values.csv."""
    rows = []
    for (algo, size, model), errs in errors.items():
        for seed, e in enumerate(errs):
            rows.append({"row": f"{algo} {model}, {size:,} a shard", "series": f"{algo}, {size:,} a shard",
                         "model": model, "column": "error_pct", "seed": seed, "value": e})
    path = tmp_path / "x_values.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def design(ma_g, ec_g, ma_l, ec_l):
    """Per size (500, 3000): the four rows' per-seed errors."""
    out = {}
    for size in (500, 3000):
        out[("MA-DNN", size, "G")] = ma_g[size]
        out[("EC-DNN", size, "G")] = ec_g[size]
        out[("MA-DNN", size, "0")] = ma_l[size]
        out[("EC-DNN", size, "0")] = ec_l[size]
    return out


def run(tmp_path, errors):
    out_csv, out_md = tmp_path / "d.csv", tmp_path / "d.md"
    rc = dr.main(["--figure", "sun2016/cifar100_shards", "--values", str(values(tmp_path, errors)),
                  "--experiments", str(SUN), "--csv", str(out_csv), "--markdown", str(out_md)])
    assert rc == 0
    t = pd.read_csv(out_csv)
    return t, out_md.read_text()


def answers(t):
    trend = t[t["quantity"].str.contains("trend")]
    return dict(zip(trend["quantity"].str[0], trend["answer"]))


def test_paper_effects_come_from_the_reference_rows():
    effects, gap = dr.paper_effects(SUN, "cifar100", 4)
    assert effects["G"] == pytest.approx(36.18 - 30.26)
    assert effects["L"] == pytest.approx(36.39 - 34.8)
    assert gap == pytest.approx(34.8 - 30.26)


def test_artefact_finding_and_undecided(tmp_path):
    # G: EC-DNN 15 points behind at 500, 8 ahead at 3,000 on every seed -> artefact
    # L: EC-DNN 15 behind at both sizes -> finding (the largest shard's bound below the paper's 1.59)
    errs = design(ma_g={500: [30, 31, 32], 3000: [30, 31, 32]},
                  ec_g={500: [45, 46, 47.5], 3000: [22, 23.5, 24]},
                  ma_l={500: [30, 31, 32], 3000: [30, 31, 32]},
                  ec_l={500: [45, 46, 47], 3000: [45, 46.5, 47]})
    t, md = run(tmp_path, errs)
    assert answers(t) == {"G": "artefact of the shard size", "L": "finding"}
    g3000 = t[(t["quantity"].str.startswith("G:")) & (t["shard"] == 3000)].iloc[0]
    assert g3000["mean"] == pytest.approx((8 + 7.5 + 8) / 3)
    gap = t[t["quantity"].str.startswith("EC-DNN G - L")]
    assert list(gap["shard"]) == [500, 3000] and list(gap["answer"]) == ["carries the ensemble (shown)", "does not carry it (refuted)"]
    assert gap["paper"].iloc[0] == pytest.approx(2 * 4.54)
    assert "artefact of the shard size" in md and "| finding |" in md
    # the same data with seeds so spread that 3 cannot tell -> undecided
    errs[("EC-DNN", 3000, "G")] = [40, 10, 50]
    t, _ = run(tmp_path, errs)
    assert answers(t)["G"] == "undecided at 3 seeds"


def test_bad_input_is_one_line(tmp_path, capsys):
    path = tmp_path / "v_values.csv"
    path.write_text("series,model,column,seed,value\n\"all-reduce\",G,error_pct,0,3\n")
    rc = dr.main(["--figure", "sun2016/cifar100_shards", "--values", str(path), "--experiments", str(SUN),
                  "--csv", str(tmp_path / "d.csv"), "--markdown", str(tmp_path / "d.md")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert str(path) in err and "'all-reduce'" in err
    assert not (tmp_path / "d.csv").exists()


def test_a_non_numeric_value_is_named(tmp_path):
    path = values(tmp_path, design(*({500: [1, 2, 3], 3000: [1, 2, 3]},) * 4))
    text = path.read_text().replace(",3\n", ",garbage\n", 1)
    path.write_text(text)
    with pytest.raises(dr.DoseError, match="key value: expected a finite error_pct"):
        dr.read_values(path)


def test_a_reference_row_without_the_papers_number_is_named():
    with pytest.raises(dr.DoseError, match=r"figures.cifar10_k4.rows: expected a row 'MA-DNN L, K=4'"):
        dr.paper_effects(SUN, "cifar10_k4", 4)
