"""A speedup claim whose faster arm reaches the target on 2 of its 3 seeds (issue 52, mutant C10 of
analysis/claims.py: `reached == len(r)` read as `>= len(r) - 1`): the seed that never reached it
bounds its ratio from above only, so the claim has no lower bound and never "holds", end to end through
analysis.claims.evaluate. A two-sided interval over the 2 that reached would hold (about [1.4, 2.7])."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

from analysis import claims


def curve(series: str, seed: int, values: list[float]) -> list[dict]:
    return [{"series": series, "seed": seed, "model": "0", "step": (i + 1) * 10, "wall_s": i, "metric": "val_loss",
             "val_loss": v} for i, v in enumerate(values)]


@pytest.fixture
def figure(tmp_path):
    """Figure 'f' (val_loss, lower is better): b reaches its best 1.8 at step 40 on every seed; a reaches
    1.8 at step 20 on seed 0 (ratio 2), at step 19.09 on seed 1 (2.8 -> 1.7 over steps 10-20: ratio 2.095),
    and never on seed 2, in a run of 80 steps (its ratio is below 40 / 80 = 0.5)."""
    rows = []
    for seed in range(3):
        rows += curve("b", seed, [3.0, 2.5, 2.0, 1.8, 1.8])
    rows += curve("a", 0, [2.8, 1.8, 1.6, 1.5])
    rows += curve("a", 1, [2.8, 1.7, 1.6, 1.5])
    rows += curve("a", 2, [3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3])
    pd.DataFrame(rows).to_csv(tmp_path / "f_curves.csv", index=False)
    (tmp_path / "f_runs.json").write_text(json.dumps({"paper": "toy", "figure": "f", "panels": ["val_loss"],
                                                      "series": ["a", "b"], "runs": []}))
    spec = {"paper": "toy", "figures": {"f": {"title": "t", "kind": "curves", "scales": {
        "embedded": {"base": {"seed": 0}, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}},
        "claims": [{"id": "faster", "claim": "a reaches b's best level sooner", "figure": "f", "basis": "step-matched",
                    "measure": "speedup", "a": "a", "b": "b"}]}
    (tmp_path / "experiments.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path


def test_two_of_three_seeds_reaching_the_target_give_no_lower_bound(figure):
    c = claims.parse(yaml.safe_load((figure / "experiments.yaml").read_text()), figure / "experiments.yaml").claims[0]
    iv, per_seed, reached = claims.effects(c, json.loads((figure / "f_runs.json").read_text()), figure)
    assert reached == "2 of 3 seeds reached 1.8"
    assert per_seed[0] == pytest.approx(2.0) and per_seed[1] == pytest.approx(40 / (10 + 10 / 1.1))
    assert per_seed[2] == "< 0.5"
    assert iv.n == 3 and math.isnan(iv.low) and iv.high > 1   # an upper bound over all three, nothing below


def test_two_of_three_seeds_reaching_the_target_never_hold_through_evaluate(figure):
    row = claims.evaluate(figure / "experiments.yaml", figure, "embedded").set_index("id").loc["faster"]
    assert claims.verdict_kind(row["verdict"]) != "holds", row["verdict"]
    assert claims.verdict_kind(row["verdict"]) == "inconclusive", row["verdict"]
    assert math.isnan(row["interval_low"]) and "censored" in row["method"]
    assert row["reached"] == "2 of 3 seeds reached 1.8"
