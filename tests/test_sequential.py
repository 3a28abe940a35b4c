"""A claim's pre-registered sequential design (analysis/sequential.py): Bonferroni-level bounds at each
planned look, the stopping rule on both sides of each boundary, the state the claims analysis writes,
the plan that continues a figure's seeds from it, and one-line errors for bad declarations. Expected
bounds come from scipy.stats.t and hand arithmetic here, not from the code under test. Nothing trains:
hand-written curves in the pipeline's formats, and plans."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from scipy.stats import t as student_t

from analysis import claims, preregistration, schema, sequential, stats
from workflows.experiments import ExperimentsError, load_plan

ROOT = Path(__file__).resolve().parents[1]
BASE = {"workload": {"name": "cifar"}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
        "launch": {"device": "cpu"}}
LOOK1 = [0.0, 1.0, 2.0]          # mean 1, sd 1 over seeds 0-2
LOOK2 = LOOK1 + [1.0, 1.0]       # mean 1, sd sqrt(0.5) over seeds 0-4
T1 = float(student_t.ppf(1 - 0.05 / 2, 2))          # L = 2 looks: each bound at 0.975
T2 = float(student_t.ppf(1 - 0.05 / 2, 4))
LOW1, HIGH1 = 1 - T1 / math.sqrt(3), 1 + T1 / math.sqrt(3)                  # -1.4841, 3.4841
LOW2 = 1 - T2 * math.sqrt(0.5) / math.sqrt(5)                               # 0.1220
LOW_FIXED = 1 - float(student_t.ppf(0.95, 2)) / math.sqrt(3)               # today's rule at n = 3: -0.6859


def claim(id_="c", looks=(3, 5), **kw):
    c = {"id": id_, "claim": "a beats b", "figure": "f", "basis": "step-matched", "measure": "final",
         "metric": "val_loss", "a": "a", "b": "b", **kw}
    return {**c, "sequential": {"looks": list(looks)}} if looks else c


def write_spec(root, *claims_, seeds=(0, 1, 2)):
    """A paper 'toy' with figure f (series a, b) and figure g (no sequential claim), under root/toy."""
    (root / "toy").mkdir(parents=True, exist_ok=True)
    fig = lambda: {"title": "t", "kind": "curves", "scales": {"embedded": {   # noqa: E731
        "base": BASE, "seeds": list(seeds), "series": {"a": {"optimizer.lr": 0.2}, "b": {}}}}}
    doc = {"paper": "toy", "source": "a test", "figures": {"f": fig(), "g": fig()}, "claims": list(claims_)}
    path = root / "toy" / "experiments.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_figure(d, effects, declared=None, metric="val_loss", workload=None):
    """f's tables with these per-seed effects (val_loss: b ends at 2.0, a at 2.0 - effect) for seeds
    0..len-1; `declared`: the plan's declared_seeds (a figure a sequential look extended); `workload`:
    series a's (its validation size)."""
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"series": s, "seed": seed, "model": "0", "step": step, "wall_s": 0, "metric": metric, metric: v}
            for seed, e in enumerate(effects) for s, end in (("a", 2.0 - e), ("b", 2.0))
            for step, v in ((10, 3.0), (20, end))]
    pd.DataFrame(rows).to_csv(d / "f_curves.csv", index=False)
    runs = [{"series": s, "seed": seed, "run_id": f"{s}{seed}", "run_dir": "x"} for s in ("a", "b")
            for seed in range(len(effects))]
    (d / "f_runs.json").write_text(json.dumps({"paper": "toy", "figure": "f", "panels": [metric], "runs": runs,
                                               **({"declared_seeds": declared} if declared else {}),
                                               **({"configs": {"a": {"workload": workload}}} if workload else {})}))
    claims.read_table.cache_clear()
    claims.read_manifest.cache_clear()
    return d


def evaluate(tmp_path, effects, *claims_, declared=None):
    spec = write_spec(tmp_path / "rep", *claims_)
    df, state = claims.evaluate_with_state(spec, write_figure(tmp_path / "fig", effects, declared), "embedded")
    return df.set_index("id"), {r["id"]: r for r in state}


def seeds_read(row) -> list[str]:
    return [part.split(":")[0] for part in row["per_seed"].split("; ")]


# ------------------------------------------------------------------ the level and the interval
def test_each_look_is_at_one_minus_alpha_over_the_looks():
    assert sequential.confidence(2) == pytest.approx(0.975) and sequential.confidence(3) == pytest.approx(1 - 0.05 / 3)
    iv = stats.at_confidence(stats.t_interval(pd.Series(LOOK1)), 0.975)
    assert (iv.low, iv.high) == (pytest.approx(LOW1), pytest.approx(HIGH1))
    assert iv.method == f"one-sided t, t(0.975, 2) = {T1:.3g}"
    censored = stats.at_confidence(stats.upper_bound_interval(pd.Series(LOOK1)), 0.975)
    assert math.isnan(censored.low) and censored.high == pytest.approx(HIGH1)   # still no lower bound


def test_seeds_continue_after_the_largest_declared_one():
    assert sequential.continued([0, 1, 2], 5) == [0, 1, 2, 3, 4]
    assert sequential.continued([4, 0, 9], 5) == [4, 0, 9, 10, 11]
    assert sequential.continued([0, 1, 2], 3) == [0, 1, 2]


# ------------------------------------------------------------------ the stopping rule
def test_a_decisive_first_look_stops_and_an_inconclusive_one_asks_for_the_next_n(tmp_path):
    df, state = evaluate(tmp_path, LOOK1, claim("holds", at_least=LOW1 - 1e-6), claim("asks", at_least=LOW1 + 1e-6),
                         claim("not", at_least=HIGH1 + 1e-6), claim("fixed", looks=None, at_least=-1.0),
                         claim("seq", at_least=-1.0))
    assert df.loc["holds", "verdict"] == "holds" and df.loc["not", "verdict"] == "does not hold"
    assert claims.verdict_kind(df.loc["asks", "verdict"]) == "inconclusive"
    assert df.loc["holds", "interval_low"] == pytest.approx(LOW1)
    assert "t(0.975, 2)" in df.loc["holds", "method"]
    assert state["holds"]["status"] == "final" and state["holds"]["seeds_needed"] == 3 and state["holds"]["look"] == 1
    assert state["asks"]["status"] == "next look" and state["asks"]["seeds_needed"] == 5
    assert df.loc["asks", "sequential"].startswith("look 1 of 2 (looks at 3, 5 seeds): n = 3, seeds 0, 1, 2; "
                                                   "one-sided bounds at 0.975 (Bonferroni: 0.05 / 2 looks)")
    assert df.loc["asks", "sequential"].endswith("the next look needs 5 seeds (make replicate-sequential)")
    assert df.loc["holds", "sequential"].endswith("; final")
    # the same data and threshold: today's fixed-n rule (0.95) holds, the first of two looks (0.975) does not
    assert LOW1 < -1.0 < LOW_FIXED
    assert df.loc["fixed", "verdict"] == "holds" and pd.isna(df.loc["fixed", "sequential"])
    assert claims.verdict_kind(df.loc["seq", "verdict"]) == "inconclusive"
    assert set(state) == {"holds", "asks", "not", "seq"}   # the claim without `sequential` has no state


@pytest.mark.parametrize("at_least, verdict, look", [
    (LOW1 + 1e-6, "holds", 2),           # inconclusive at look 1, the second look's low 0.122 > -1.48
    (LOW2 - 1e-6, "holds", 2),
    (LOW2 + 1e-6, "inconclusive", 2),    # the last look: final as it stands
    (LOW1 - 1e-6, "holds", 1),           # decided at look 1: seeds 3 and 4 are never read
])
def test_the_next_look_reads_its_seeds_when_the_figure_holds_them(tmp_path, at_least, verdict, look):
    df, state = evaluate(tmp_path, LOOK2, claim("c", at_least=at_least), declared=[0, 1, 2])
    assert claims.verdict_kind(df.loc["c", "verdict"]) == verdict
    assert state["c"]["look"] == look and state["c"]["status"] == "final"
    assert state["c"]["n"] == state["c"]["seeds_needed"] == (3, 5)[look - 1] == df.loc["c", "n"]
    if look == 2:
        assert df.loc["c", "interval_low"] == pytest.approx(LOW2)
        assert "t(0.975, 4)" in df.loc["c", "method"]
    assert seeds_read(df.loc["c"]) == ["0", "1", "2", "3", "4"][:(3, 5)[look - 1]]


def test_the_last_look_with_a_margin_it_cannot_resolve_reads_underpowered_at_its_level(tmp_path):
    df, state = evaluate(tmp_path, LOOK2, claim("m", within=2.5), declared=[0, 1, 2])
    # neutral 0, within 2.5: look 1 bounds [-1.48, 3.48] reach outside +-2.5 -> next look; look 2 [0.12, 1.88]
    # inside -> holds. A margin just above / below what 5 seeds with sd 0.707 resolve at 0.975,
    # (t(0.975, 4) + t(0.90, 4)) 0.707 / sqrt(5) = 1.363: inconclusive at the last look / underpowered
    assert df.loc["m", "verdict"] == "holds" and state["m"]["look"] == 2
    need = (T2 + float(student_t.ppf(0.90, 4))) * math.sqrt(0.5) / math.sqrt(5)
    df, _ = evaluate(tmp_path / "2", LOOK2, claim("m", within=need + 1e-6), declared=[0, 1, 2])
    assert claims.verdict_kind(df.loc["m", "verdict"]) == "inconclusive"
    df, _ = evaluate(tmp_path / "3", LOOK2, claim("m", within=need - 1e-6), declared=[0, 1, 2])
    assert df.loc["m", "verdict"].startswith(f"underpowered: margin {need - 1e-6:g} < {need:.3g}")


def test_before_the_runs_a_margin_is_judged_at_the_last_look_s_seeds_and_level(tmp_path):
    # 1,000 validation examples: an equivalence margin needs (t(q, n-1) + t(0.90, n-1)) sqrt(0.5 / 1000) / sqrt(n):
    # at the last of looks [3, 5] (n = 5, q = 0.975) 0.0460; today's fixed n = 3 at 0.95: 0.0620
    floor = math.sqrt(0.5 / 1000)
    need5 = (T2 + float(student_t.ppf(0.90, 4))) * floor / math.sqrt(5)
    need3 = (float(student_t.ppf(0.95, 2)) + float(student_t.ppf(0.90, 2))) * floor / math.sqrt(3)
    assert need5 < 0.05 < need3
    spec = write_spec(tmp_path / "rep", claim("under", metric="val_accuracy", within=need5 - 1e-5),
                      claim("enough", metric="val_accuracy", within=need5 + 1e-5),
                      claim("fixed", looks=None, metric="val_accuracy", within=0.05),
                      claim("seq", metric="val_accuracy", within=0.05))
    figs = write_figure(tmp_path / "fig", [0.0, 0.001, -0.001], metric="val_accuracy",
                        workload={"name": "imagenet", "dataset": "embedded", "val_size": 1000})
    df = claims.evaluate(spec, figs, "embedded").set_index("id")
    assert df.loc["under", "verdict"] == (f"underpowered: margin {need5 - 1e-5:g} < {need5:.3g}, the least that 5 seeds x "
                                          f"1000 validation examples resolve (80% power, bounds at 0.975: the last look's)")
    assert df.loc["fixed", "verdict"].startswith(f"underpowered: margin 0.05 < {need3:.3g}, the least that 3 seeds")
    assert df.loc["enough", "verdict"] == df.loc["seq", "verdict"] == "holds"   # bounds +/- 0.0025 at look 1
    # three looks: the last one's 8 seeds at 1 - 0.05 / 3, not the second's 5
    need8 = (float(student_t.ppf(1 - 0.05 / 3, 7)) + float(student_t.ppf(0.90, 7))) * floor / math.sqrt(8)
    write_spec(tmp_path / "rep", claim("under", looks=(3, 5, 8), metric="val_accuracy", within=need8 - 1e-5))
    df = claims.evaluate(spec, figs, "embedded").set_index("id")
    assert df.loc["under", "verdict"] == (f"underpowered: margin {need8 - 1e-5:g} < {need8:.3g}, the least that 8 seeds x "
                                          f"1000 validation examples resolve (80% power, bounds at 0.9833: the last look's)")


def test_a_claim_without_sequential_reads_the_declared_seeds_of_an_extended_figure(tmp_path):
    df, state = evaluate(tmp_path, LOOK2, claim("fixed", looks=None, at_least=-1.0), declared=[0, 1, 2])
    plain, _ = evaluate(tmp_path / "plain", LOOK1, claim("fixed", looks=None, at_least=-1.0))
    assert df.loc["fixed", "verdict"] == "holds" and df.loc["fixed", "n"] == 3
    assert seeds_read(df.loc["fixed"]) == ["0", "1", "2"]
    cols = [c for c in claims.COLUMNS if c not in ("id",)]
    assert df.loc["fixed", cols].fillna("").to_dict() == plain.loc["fixed", cols].fillna("").to_dict()
    assert df.loc["fixed", "interval_low"] == pytest.approx(LOW_FIXED) and state == {}


def test_a_regime_failure_at_a_look_is_final_and_asks_for_nothing(tmp_path):
    check = {"check": "b plateaued", "source": "Fig. 0", "quantity": "last_gain", "series": "b", "max": 0.01}
    df, state = evaluate(tmp_path, LOOK1, claim("r", at_least=0.5, regime=[check]))
    assert df.loc["r", "verdict"].startswith("not in the paper's regime") and state["r"]["status"] == "final"


def test_the_cli_writes_the_state_beside_the_claims_and_removes_a_stale_one(tmp_path):
    spec, figs = write_spec(tmp_path / "rep", claim("asks", at_least=0.5)), write_figure(tmp_path / "fig", LOOK1)
    out = tmp_path / "out"
    args = ["--paper", str(spec), "--figures", str(figs), "--csv", str(out / "claims.csv"), "--markdown", str(out / "c.md")]
    assert claims.main(args) == 0
    rows = sequential.read_state(out / "sequential.csv")
    assert [(r["id"], r["looks"], r["status"], r["seeds_needed"], r["verdict"]) for r in rows] == \
        [("asks", [3, 5], "next look", 5, "inconclusive")]
    md = (out / "c.md").read_text()
    assert "inconclusive (look 1 of 2, more seeds asked)" in md and "- sequential design: look 1 of 2" in md
    write_spec(tmp_path / "rep", claim("asks", looks=None, at_least=0.5))
    assert claims.main(args) == 0 and not (out / "sequential.csv").exists()


# ------------------------------------------------------------------ the plan
def state_file(results, rows):
    path = results / "embedded" / "toy" / sequential.STATE
    path.parent.mkdir(parents=True, exist_ok=True)
    sequential.write_state(path, [{"paper": "toy", "figure": "f", "looks": "3 5 8", "look": 1, "n": 3,
                                   "confidence": 0.98, "status": "next look", "verdict": "inconclusive", **r}
                                  for r in rows])
    return path


def seeds_of(plan, fig):
    return sorted({r.seed for r in plan.figure("toy", fig).runs})


def test_the_plan_continues_a_figure_s_seeds_to_what_its_state_asks(tmp_path):
    write_spec(tmp_path / "rep", claim("c", looks=(3, 5, 8)), claim("d", looks=None))
    before = load_plan(tmp_path / "rep", "embedded", results=tmp_path / "res")   # no state: the declared seeds
    assert seeds_of(before, "f") == [0, 1, 2] and "declared_seeds" not in before.figure_manifest("toy", "f", "r")
    state_file(tmp_path / "res", [{"id": "c", "seeds_needed": 5}])
    plan = load_plan(tmp_path / "rep", "embedded", results=tmp_path / "res")
    assert seeds_of(plan, "f") == [0, 1, 2, 3, 4] and seeds_of(plan, "g") == [0, 1, 2]
    manifest = plan.figure_manifest("toy", "f", "r")
    assert manifest["declared_seeds"] == [0, 1, 2] and sequential.figure_seeds(manifest) == [0, 1, 2, 3, 4]
    assert "declared_seeds" not in plan.figure_manifest("toy", "g", "r")
    assert set(before.configs) < set(plan.configs) and len(plan.configs) == len(before.configs) + 4


@pytest.mark.parametrize("row, expected", [
    ({"id": "c", "looks": "3 5", "seeds_needed": 5}, r"claim 'c' \(figure 'f', looks \[3, 5\]\) is not a sequential claim"),
    ({"id": "zz", "seeds_needed": 5}, r"claim 'zz' .*is not a sequential claim"),
    ({"id": "c", "seeds_needed": 6}, r"line 2 \(claim 'c'\): seeds_needed 6 is not one of its looks \[3, 5, 8\]"),
])
def test_a_state_the_design_does_not_have_is_one_line_naming_the_file(tmp_path, row, expected):
    write_spec(tmp_path / "rep", claim("c", looks=(3, 5, 8)))
    path = state_file(tmp_path / "res", [row])
    with pytest.raises(ExperimentsError, match=expected) as e:
        load_plan(tmp_path / "rep", "embedded", results=tmp_path / "res")
    assert str(e.value).startswith(str(path)) and len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("sequential_, expected", [
    ({"looks": [3, 3, 5]}, "the seed counts of the looks must increase strictly"),
    ({"looks": [3]}, "List should have at least 2 items"),
    ({"looks": [2, 4]}, "every look needs at least 3 seeds"),
    ({"looks": [3, 5], "alpha": 0.1}, "sequential.alpha: unknown key"),
    ({"looks": [4, 6]}, r"sequential.looks: the first look is the figure's declared seeds \(3 at scale 'embedded'\); "
                        r"got \[4, 6\]"),
])
def test_a_bad_declaration_is_one_line_naming_the_file_the_claim_and_the_key(tmp_path, sequential_, expected):
    path = write_spec(tmp_path / "rep", {**claim("c"), "sequential": sequential_})
    with pytest.raises(ExperimentsError, match=expected) as e:
        load_plan(tmp_path / "rep", "embedded")
    assert str(e.value).startswith(f"{path}: claim 'c'") and len(str(e.value).splitlines()) == 1


def test_looks_declared_for_one_scale_only(tmp_path):
    per_scale = {**claim("c", looks=None), "scales": {"embedded": {"sequential": {"looks": [3, 5, 8]}}}}
    write_spec(tmp_path / "rep", per_scale)
    state_file(tmp_path / "res", [{"id": "c", "seeds_needed": 8}])
    assert seeds_of(load_plan(tmp_path / "rep", "embedded", results=tmp_path / "res"), "f") == list(range(8))
    path = write_spec(tmp_path / "rep", {**per_scale, "scales": {"embedded": {"sequential": {"looks": [3, 3]}}}})
    with pytest.raises(ExperimentsError) as e:
        load_plan(tmp_path / "rep", "embedded")
    assert str(e.value) == (f"{path}: claim 'c' (claims.0): scales.embedded.sequential.looks: the seed counts of the "
                            f"looks must increase strictly")


def test_no_sequential_design_on_an_exact_byte_identity(tmp_path):
    path = write_spec(tmp_path / "rep", claim("c", measure="comm_ratio"))
    with pytest.raises(ExperimentsError, match="a comm_ratio is exact"):
        load_plan(tmp_path / "rep", "embedded")
    assert schema.MIN_LOOK == stats.MIN_SEEDS and path.exists()


def test_fresh_seeds_never_reuse_the_seeds_a_sequential_look_adds(tmp_path):
    write_spec(tmp_path / "rep", claim("c", looks=(3, 5, 8)))
    with pytest.raises(ExperimentsError, match=r"seed_offset 3 maps \[0, 1, 2\] onto \[3, 4, 5\], which reuses declared "
                                               r"seeds or the seeds its sequential looks add \(\[3, 4, 5, 6, 7\]\); "
                                               r"use an offset above 7"):
        load_plan(tmp_path / "rep", "embedded", seed_offset=3)
    assert seeds_of(load_plan(tmp_path / "rep", "embedded", seed_offset=8), "f") == [8, 9, 10]


# ------------------------------------------------------------------ the loop's test and the design
def test_pending_asks_for_more_only_while_a_figure_lacks_the_seeds(tmp_path, capsys):
    scale_dir = tmp_path / "res" / "embedded"
    state_file(tmp_path / "res", [{"id": "c", "seeds_needed": 5}])
    write_figure(scale_dir / "toy", LOOK1)
    assert sequential.main(["pending", str(scale_dir)]) == sequential.PENDING_EXIT
    assert "toy c: look 1 of 3 inconclusive at n = 3; figure f needs 5 seeds (holds 3)" in capsys.readouterr().out
    write_figure(scale_dir / "toy", LOOK2)   # the figure holds 5 seeds, the claims table still asks: it is stale
    assert sequential.main(["pending", str(scale_dir)]) == 2
    assert "older than the figure" in capsys.readouterr().err
    state_file(tmp_path / "res", [{"id": "c", "seeds_needed": 5, "look": 2, "n": 5, "status": "final"}])
    assert sequential.main(["pending", str(scale_dir)]) == 0


def emulated_passes(tmp_path, progress=True):
    """A pass of make replicate as the loop sees it: the first leaves claim c at look 1 of [3, 5, 8]
    asking for 5 seeds; each later pass (if `progress`) adds the seeds asked and reaches the next look."""
    scale_dir = tmp_path / "res" / "embedded"
    passes = []

    def one_pass() -> int:
        passes.append(1)
        look = min(len(passes), 3) if progress else 1
        n, needed = (3, 5, 8)[look - 1], (5, 8, 8)[look - 1]
        state_file(tmp_path / "res", [{"id": "c", "look": look, "n": n, "seeds_needed": needed,
                                       "status": "next look" if needed > n else "final"}])
        write_figure(scale_dir / "toy", [0.0] * n)
        return 0
    return scale_dir, passes, one_pass


def test_repeat_runs_passes_until_no_claim_asks_and_stops_a_pass_that_adds_nothing(tmp_path, capsys):
    scale_dir, passes, one_pass = emulated_passes(tmp_path / "on")
    sequential.repeat(one_pass, scale_dir)
    assert len(passes) == 3   # looks 1, 2, 3: the third is final
    assert "figure f needs 8 seeds (holds 5)" in capsys.readouterr().out
    scale_dir, passes, one_pass = emulated_passes(tmp_path / "stuck", progress=False)
    with pytest.raises(sequential.SequentialError, match="the last pass added none of the seeds asked") as e:
        sequential.repeat(one_pass, scale_dir)
    assert len(passes) == 2
    # every tier a make replicate names (the default needs no TIER=), so the reader finds the right one
    assert str(e.value).endswith("needs TIER=<its tier>: " + " or ".join(t for t in schema.TIERS if t != "default") + ")")
    scale_dir, passes, one_pass = emulated_passes(tmp_path / "few")
    with pytest.raises(sequential.SequentialError, match="still ask for more seeds after 1 more passes"):
        sequential.repeat(one_pass, scale_dir, passes=1)
    with pytest.raises(sequential.SequentialError, match="a pass failed"):
        sequential.repeat(lambda: 1, scale_dir)


def test_repeat_from_the_command_line_runs_the_command_given(tmp_path):
    script = tmp_path / "pass.py"   # a command that writes a final state: one pass
    script.write_text(f"from pathlib import Path\n(Path({str(tmp_path / 'ran')!r})).write_text('1')\n")
    assert sequential.main(["repeat", str(tmp_path / "res" / "embedded"), "--", sys.executable, str(script)]) == 0
    assert (tmp_path / "ran").read_text() == "1"
    assert sequential.main(["repeat", str(tmp_path / "res" / "embedded"), "--", sys.executable, "-c",
                            "raise SystemExit(4)"]) == 2



def test_pending_exits_3_and_reads_every_claim_of_the_state(tmp_path, capsys):
    # the documented exit status (make replicate-sequential, make verify branch on it); a final claim listed
    # before one that asks is skipped, not the end of the file; a figure without _runs.json holds no seeds
    scale_dir = tmp_path / "res" / "embedded"
    state_file(tmp_path / "res", [{"id": "done", "look": 1, "seeds_needed": 3, "status": "final"},
                                  {"id": "c", "seeds_needed": 5}])
    assert sequential.main(["pending", str(scale_dir)]) == 3
    assert capsys.readouterr().out.splitlines() == ["toy c: look 1 of 3 inconclusive at n = 3; figure f needs 5 seeds "
                                                    "(holds 0)"]


def test_a_state_with_looks_that_are_not_integers_is_one_line_and_exit_2(tmp_path, capsys):
    path = state_file(tmp_path / "res", [{"id": "c", "looks": "3 five 8", "seeds_needed": 5}])
    assert sequential.main(["pending", str(tmp_path / "res" / "embedded")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: line 2 (claim 'c'): looks and seeds_needed must be integers; "
                   f"got '3 five 8', '5'\n")


def test_repeat_stops_after_the_first_pass_and_20_more(tmp_path):
    # every pass adds the seeds asked and reaches the next of 28 looks, so claims keep asking: the documented
    # limit (Makefile's replicate-sequential: "20 more passes did not end it") ends the loop after 21 passes
    scale_dir, passes = tmp_path / "res" / "embedded", []
    looks = " ".join(map(str, range(3, 31)))

    def one_pass() -> int:
        passes.append(1)
        n = 2 + len(passes)
        state_file(tmp_path / "res", [{"id": "c", "looks": looks, "look": len(passes), "n": n, "seeds_needed": n + 1}])
        write_figure(scale_dir / "toy", [0.0] * n)
        return 0
    with pytest.raises(sequential.SequentialError, match="still ask for more seeds after 20 more passes"):
        sequential.repeat(one_pass, scale_dir)
    assert len(passes) == 21
    passes.clear()
    with pytest.raises(sequential.SequentialError, match="after 2 more passes"):
        sequential.repeat(one_pass, scale_dir, passes=2)
    assert len(passes) == 3


PASS = """import json, sys
from pathlib import Path
res = Path(sys.argv[1]) / "toy"
res.mkdir(parents=True, exist_ok=True)
k = len(list(res.glob("pass-*"))) + 1
(res / f"pass-{k}").write_text("")
print(f"pass {k}")
n, needed = (3, 5, 8)[k - 1], (5, 8, 8)[k - 1]
(res / "sequential.csv").write_text("paper,id,figure,looks,look,n,confidence,status,seeds_needed,verdict\\n"
    f"toy,c,f,3 5 8,{k},{n},0.98,{'next look' if needed > n else 'final'},{needed},inconclusive\\n")
(res / "f_runs.json").write_text(json.dumps({"runs": [{"seed": s} for s in range(n)]}))
"""


def test_repeat_from_the_command_line_prints_what_each_pass_left_asking_before_the_next(tmp_path):
    # a log read top to bottom: each pass's output, then the claims it left asking, then the next pass
    script, scale_dir = tmp_path / "pass.py", tmp_path / "res" / "embedded"
    script.write_text(PASS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}   # a log file or pipe: block-buffered
    proc = subprocess.run([sys.executable, str(ROOT / "analysis" / "sequential.py"), "repeat", str(scale_dir), "--",
                           sys.executable, str(script), str(scale_dir)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["pass 1", "toy c: look 1 of 3 inconclusive at n = 3; figure f needs 5 seeds (holds 3)",
                                        "pass 2", "toy c: look 2 of 3 inconclusive at n = 5; figure f needs 8 seeds (holds 5)",
                                        "pass 3"]


def test_the_separator_before_the_command_is_never_run_as_the_command(tmp_path):
    # argparse passes a `--` after the first on to the command's words (python 3.11 drops the first one): either
    # way the command run is what follows the separator
    script = tmp_path / "pass.py"
    script.write_text(f"from pathlib import Path\n(Path({str(tmp_path / 'ran')!r})).write_text('1')\n")
    assert sequential.main(["repeat", str(tmp_path / "res" / "embedded"), "--", "--", sys.executable, str(script)]) == 0
    assert (tmp_path / "ran").read_text() == "1"
    with pytest.raises(SystemExit) as e:   # a separator and no command: a usage error, nothing run
        sequential.main(["repeat", str(tmp_path / "res" / "embedded"), "--", "--"])
    assert e.value.code == 2


def test_the_command_line_says_what_it_is_and_asks_for_a_command(capsys):
    with pytest.raises(SystemExit) as e:
        sequential.main(["--help"])
    assert e.value.code == 0
    assert "A claim's pre-registered group-sequential design: more seeds at planned looks" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:   # no subcommand: one usage error naming it, exit 2
        sequential.main([])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("error: the following arguments are required: command")


def test_a_judge_cannot_alter_the_look_it_is_given():
    # the looks are fixed in advance: judge_at (analysis/claims.py) reads a look, never moves the rule to another
    def judge_at(look):
        with pytest.raises(AttributeError):
            look.index = 3
        return {"verdict": "inconclusive"}
    fields, look, needed = sequential.decide_looks([3, 5, 8], [0, 1, 2], set(range(8)), judge_at)
    assert (look.index, look.n, look.n_max, needed) == (3, 8, 8, 8)


def test_the_looks_and_the_seeds_they_add_are_part_of_the_design():
    doc = {"claims": [claim("c", looks=(3, 5, 8))],
           "figures": {"f": {"scales": {"embedded": {"base": BASE, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}}}
    d = preregistration.claim_design(doc, "c", "embedded", lambda name: {})
    assert d["sequential"] == {"looks": [3, 5, 8]}
    assert d["runs"]["f"]["continued_seeds"] == [0, 1, 2, 3, 4, 5, 6, 7]
    plain = preregistration.claim_design({**doc, "claims": [claim("c", looks=None)]}, "c", "embedded", lambda name: {})
    assert "continued_seeds" not in plain["runs"]["f"]
    assert preregistration._changed_keys(plain, d) == ["runs.f.continued_seeds", "sequential"]



def test_declaring_looks_after_results_is_a_design_change_to_declare(tmp_path):
    from test_preregistration import Repo, spec   # its throw-away git repository and toy paper
    repo = Repo(tmp_path)
    repo.commit(spec())
    repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**{"claims.0.sequential": {"looks": [3, 5, 8]}}))
    rec = repo.record()
    assert (rec.relation, rec.after_results) == ("after results", [changed])
    assert rec.changes[changed] == "runs.f.continued_seeds, sequential"
    assert preregistration.undeclared(rec, []) == [changed]


# ------------------------------------------------------------------ end to end, through Snakemake
def snakemake(tmp_path, reps):
    env = {**os.environ, "CODIST_PLUGINS": "toy_workload",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path), "-c2", "--config", f"replications={reps}", "--",
                           "results/embedded/toy/claims.csv"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow   # 4 real runs of the toy plugin workload, two Snakemake passes: 140-165 s at load 7-12, 2 cores
def test_a_sequential_claim_through_the_workflow_trains_only_its_next_look_s_seeds(tmp_path):
    # series a and b are the same config (one run id per seed): every effect is exactly 0, so "at least 0"
    # is inconclusive at each look (bounds [0, 0]) and "at least -1" holds at the first
    base = {"workload": {"name": "toy_blobs"}, "optimizer": {"lr": 0.1},
            "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
            "launch": {"device": "cpu", "launcher": "warm", "threads_per_rank": 1}}
    one = {"basis": "step-matched", "measure": "final", "figure": "f", "a": "a", "b": "b", "metric": "val_toy_error"}
    doc = {"paper": "toy", "source": "a test", "figures": {"f": {
        "title": "t", "kind": "curves", "panels": ["val_toy_error"],
        "scales": {"embedded": {"base": base, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}},
        "claims": [{"id": "asks", "claim": "x", **one, "at_least": 0.0, "sequential": {"looks": [3, 4]}},
                   {"id": "stops", "claim": "x", **one, "at_least": -1.0, "sequential": {"looks": [3, 4]}},
                   {"id": "fixed", "claim": "x", **one, "at_least": -1.0}]}
    reps = tmp_path / "reps"
    (reps / "toy").mkdir(parents=True)
    (reps / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    scale_dir = tmp_path / "results" / "embedded"

    snakemake(tmp_path, reps)
    assert len(list((scale_dir / "runs").glob("*/summary.json"))) == 3
    state = {r["id"]: r for r in sequential.read_state(scale_dir / "toy" / sequential.STATE)}
    assert (state["asks"]["status"], state["asks"]["seeds_needed"]) == ("next look", 4)
    assert (state["stops"]["status"], state["stops"]["seeds_needed"]) == ("final", 3) and "fixed" not in state
    assert sequential.main(["pending", str(scale_dir)]) == sequential.PENDING_EXIT

    # the loop of make replicate-sequential: a pass whose plan reads the state (seed 3, one new run), then none
    sequential.repeat(lambda: snakemake(tmp_path, reps) and 0, scale_dir)
    assert len(list((scale_dir / "runs").glob("*/summary.json"))) == 4
    manifest = json.loads((scale_dir / "toy" / "f_runs.json").read_text())
    assert manifest["declared_seeds"] == [0, 1, 2] and sequential.figure_seeds(manifest) == [0, 1, 2, 3]
    df = pd.read_csv(scale_dir / "toy" / "claims.csv").set_index("id")
    assert claims.verdict_kind(df.loc["asks", "verdict"]) == "inconclusive" and df.loc["asks", "n"] == 4
    assert df.loc["asks", "sequential"].startswith("look 2 of 2") and df.loc["asks", "sequential"].endswith("; final")
    assert (df.loc["stops", "verdict"], df.loc["stops", "n"]) == ("holds", 3)
    assert (df.loc["fixed", "verdict"], df.loc["fixed", "n"]) == ("holds", 3)   # the declared seeds only
    assert sequential.main(["pending", str(scale_dir)]) == 0
