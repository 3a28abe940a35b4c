"""workflows/compare.py: a replication's tables and claims beside the reference's, on small tables
in the real formats (a per-run figure table, a `_paper` table of means, a claims table): the three
outcomes, both verdicts side by side, and the machines from the runs' manifests."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
import compare  # noqa: E402

FIGURE_COLUMNS = ("series,seed,run_id,world_size,models,steps,samples,metric,final_metric,best_metric,best_step,"
                  "target,step_to_target,wall_s_to_target,wall_s,eval_s,setup_s,elapsed_s,"
                  "comm_sent_bytes_per_rank_per_update,between_group_sent_bytes_per_rank_per_update").split(",")


def figure_table(finals: dict[str, list[float]], wall=10.0, bytes_=4825.584) -> pd.DataFrame:
    rows = []
    for series, values in finals.items():
        for seed, v in enumerate(values):
            rows.append([series, seed, f"{abs(hash((series, seed))) % 16**12:012x}", 2, 3, 1000, 32000, "val_accuracy",
                         v, v, 1000, 0.675, float("nan"), float("nan"), wall + seed, 1.0, 0.4, wall + 2, bytes_, bytes_])
    return pd.DataFrame(rows, columns=FIGURE_COLUMNS)


REFERENCE = {"MA-DNN, K=2": [0.641, 0.634, 0.603], "EC-DNN, K=2": [0.552, 0.581, 0.442]}


def claims_table(effects: list[float], verdict: str) -> pd.DataFrame:
    s = pd.Series(effects)
    return pd.DataFrame([{
        "paper": "sun2016", "id": "cifar10-K2", "claim": "EC-DNN beats MA-DNN", "source": "Table 1",
        "basis": "round-matched", "comparison": "EC-DNN, K=2 vs MA-DNN, K=2", "measure": "final",
        "metric": "val_accuracy", "n": len(effects), "effect_mean": s.mean(), "effect_sd": s.std(ddof=1),
        "interval_low": s.mean() - 0.01, "interval_high": s.mean() + 0.01, "method": "one-sided t",
        "rule": None, "regime": "ok: 1 (<= 2) pass", "reached": None, "verdict": verdict,
        "paper_value": "lower error", "per_seed": "; ".join(f"{i}: {e:.4g}" for i, e in enumerate(effects))}])


def test_identical_tables_are_bit_identical_whatever_their_timings():
    ref = figure_table(REFERENCE)
    assert compare.judge_table(ref, figure_table(REFERENCE, wall=99.0)) == ("bit-identical", [])


def test_a_shift_the_seeds_explain_is_within_seed_noise():
    mine = {"MA-DNN, K=2": [0.645, 0.630, 0.610], "EC-DNN, K=2": [0.552, 0.581, 0.471]}   # seed 2 as in issue 27
    outcome, why = compare.judge_table(figure_table(REFERENCE), figure_table(mine))
    assert (outcome, why) == ("within seed noise", [])


def test_a_shift_beyond_the_seeds_spread_is_different_and_named():
    mine = {"MA-DNN, K=2": [0.741, 0.734, 0.703], "EC-DNN, K=2": REFERENCE["EC-DNN, K=2"]}
    outcome, why = compare.judge_table(figure_table(REFERENCE), figure_table(mine))
    assert outcome == "different"
    assert any("final_metric [series=MA-DNN, K=2" in w and "outside" in w for w in why), why
    assert not any("EC-DNN" in w for w in why), why


def test_a_changed_deterministic_number_or_label_is_different():
    outcome, why = compare.judge_table(figure_table(REFERENCE), figure_table(REFERENCE, bytes_=4900.0))
    assert outcome == "different" and any("the same in every seed" in w for w in why), why
    other = figure_table(REFERENCE)
    other.loc[0, "run_id"] = "000000000000"
    outcome, why = compare.judge_table(figure_table(REFERENCE), other)
    assert outcome == "different" and "run_id" in why[0], why


def test_a_target_reached_in_another_number_of_seeds_is_different():
    ref, mine = figure_table(REFERENCE), figure_table(REFERENCE)
    ref.loc[[0, 1, 2], "step_to_target"] = [500.0, 600.0, 700.0]
    mine.loc[[0, 1], "step_to_target"] = [500.0, 650.0]
    outcome, why = compare.judge_table(ref, mine)
    assert outcome == "different" and any("in 3 of 3 seeds in the reference, 2 of 3 here" in w for w in why), why


def test_a_paper_table_is_judged_from_its_means_sds_and_ns():
    cols = ["row", "series", "model", "error_pct paper", "error_pct ours mean", "error_pct ours sd", "error_pct n",
            "paper source"]
    ref = pd.DataFrame([["MA-DNN G, K=2", "MA-DNN, K=2", "G", 8.4, 37.7, 2.0, 3, "Table 1"]], columns=cols)
    near, far = ref.copy(), ref.copy()
    near["error_pct ours mean"], far["error_pct ours mean"] = 38.9, 60.0
    assert compare.judge_table(ref, near)[0] == "within seed noise"
    assert compare.judge_table(ref, far)[0] == "different"


def write_results(root: Path, finals, effects, verdict, hardware=None) -> Path:
    d = root / "embedded"
    (d / "sun2016").mkdir(parents=True)
    figure_table(finals).to_csv(d / "sun2016" / "cifar10.csv", index=False)
    claims_table(effects, verdict).to_csv(d / "sun2016" / "claims.csv", index=False)
    claims_table(effects, verdict).to_csv(d / "claims.csv", index=False)
    if hardware:
        (d / "runs" / "abc").mkdir(parents=True)
        (d / "runs" / "abc" / "manifest.json").write_text(json.dumps({"hardware": hardware}))
    return root


def test_the_report_puts_both_verdicts_side_by_side_and_names_the_machines(tmp_path, capsys):
    ref = write_results(tmp_path / "ref", REFERENCE, [-0.05, -0.06, -0.12], "does not hold: EC-DNN is worse")
    mine = {"MA-DNN, K=2": [0.645, 0.630, 0.610], "EC-DNN, K=2": [0.552, 0.581, 0.471]}
    hw = {"cpu_model": "Test CPU 9000", "torch_cpu_capability": "AVX512", "blas": "mkl", "torch_threads": 1}
    loc = write_results(tmp_path / "loc", mine, [-0.05, -0.05, -0.04], "inconclusive: the interval spans 0", hw)
    assert compare.main(["--results", str(loc), "--reference", str(ref)]) == 0
    out = capsys.readouterr().out
    assert "sun2016 cifar10-K2: does not hold (reference) -> inconclusive (yours)" in out, out
    md = (loc / "embedded" / "comparison.md").read_text()
    assert "| sun2016 cifar10-K2 | within seed noise | does not hold | inconclusive | changed |" in md, md
    assert "Test CPU 9000" in md and "torch_cpu_capability AVX512" in md and "reference: not recorded" in md
    table = pd.read_csv(loc / "embedded" / "comparison.csv")
    outcomes = dict(zip(table["name"], table["outcome"]))
    assert outcomes["sun2016/cifar10.csv"] == "within seed noise"
    assert (ref / "embedded" / "sun2016" / "cifar10.csv").read_text() == figure_table(REFERENCE).to_csv(index=False)


def test_the_reference_against_itself_is_refused_and_a_missing_folder_named(tmp_path, capsys):
    ref = write_results(tmp_path / "ref", REFERENCE, [0.1, 0.2, 0.3], "holds")
    assert compare.main(["--results", str(ref), "--reference", str(ref)]) == 0
    assert "is the reference itself" in capsys.readouterr().out
    assert not (ref / "embedded" / "comparison.md").exists()
    assert compare.main(["--results", str(tmp_path / "nowhere"), "--reference", str(ref)]) == 2
    assert "nowhere/embedded: no such folder" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["cpu_model", "torch_cpu_capability", "blas", "torch_threads"])
def test_a_run_records_the_machine_it_ran_on(key):
    torch = pytest.importorskip("torch")
    from codist.runlog import hardware
    hw = hardware()
    assert hw[key] not in (None, "")
    assert hw["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert hw["torch_threads"] == torch.get_num_threads()
