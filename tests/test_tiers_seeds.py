"""Tiers and fresh seeds: a figure's `tier` (analysis/schema.py) decides whether the default plan or
only `make replicate TIER=<tier>` (--config tier=paper or decisive) runs it; `seed_offset` (make replicate SEEDS=N)
shifts every seed list, so the runs get new ids and the claims table says they are not the committed
seeds. Nothing trains here: plans, a claims table from hand-written curves, one dry run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "workflows"), str(ROOT / "analysis")]
import claims  # noqa: E402
from experiments import EVERY_TIER, ExperimentsError, load_plan, unplanned_target  # noqa: E402
from schema import TIERS  # noqa: E402
from verify import default_tier_rows, of_figures  # noqa: E402
from verify import main as verify_main  # noqa: E402
from workflow_config import WorkflowConfigError, check  # noqa: E402

BASE = {"workload": {"name": "cifar"}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
        "launch": {"device": "cpu"}}


def figure(series, tier=None, seeds=(0, 1, 2)):
    return {"title": "t", "source": "Fig. 0", "kind": "curves", **({"tier": tier} if tier else {}),
            "scales": {"embedded": {"base": BASE, "seeds": list(seeds), "series": series}}}


def claim(fig, id_):
    return {"id": id_, "claim": "a beats b", "figure": fig, "basis": "step-matched", "measure": "final",
            "metric": "val_loss", "a": "a", "b": "b"}


def toy(root: Path) -> Path:
    """A paper with a default-tier figure 'small' and a paper-tier figure 'big', one claim on each."""
    (root / "toy").mkdir(parents=True)
    doc = {"paper": "toy", "source": "a test",
           "figures": {"small": figure({"a": {"optimizer.lr": 0.2}, "b": {}}),
                       "big": figure({"a": {"optimizer.lr": 0.3}, "b": {"train.steps": 20}}, tier="paper")},
           "claims": [claim("small", "c-small"), claim("big", "c-big")]}
    (root / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def test_the_default_tier_plans_default_figures_and_the_paper_tier_all(tmp_path):
    default = load_plan(toy(tmp_path), "embedded")
    assert set(default.figures) == {("toy", "small")} and len(default.configs) == 6
    assert default.tier_of == {("toy", "small"): "default", ("toy", "big"): "paper"}
    paper = load_plan(tmp_path, "embedded", tier="paper")
    assert set(paper.figures) == {("toy", "small"), ("toy", "big")} and len(paper.configs) == 12
    # asking for a paper-tier figure's file in the default tier: one line naming the switch
    msg = unplanned_target(default, "results", "results/embedded/toy/big.png")
    assert msg == ("results/embedded/toy/big.png: toy big is a paper-tier figure: add --config tier=paper "
                   "(make replicate TIER=paper)")
    assert unplanned_target(paper, "results", "results/embedded/toy/big.png") is None
    # the full scale is the papers' own setups: every figure, whatever the tier
    for fig in ("small", "big"):
        doc = yaml.safe_load((tmp_path / "toy" / "experiments.yaml").read_text())
        doc["figures"][fig]["scales"]["full"] = doc["figures"][fig]["scales"]["embedded"]
        (tmp_path / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc))
    assert set(load_plan(tmp_path, "full").figures) == {("toy", "small"), ("toy", "big")}


def toy3(root: Path) -> Path:
    """The toy paper and a decisive-tier figure 'pilot' with a claim on it."""
    path = toy(root) / "toy" / "experiments.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["figures"]["pilot"] = figure({"a": {"optimizer.lr": 0.4}, "b": {"train.steps": 30}}, tier="decisive")
    doc["claims"].append(claim("pilot", "c-pilot"))
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def test_a_tier_plans_the_figures_of_the_tiers_it_builds_on_and_no_others(tmp_path):
    """schema.BUILDS_ON: anil-ablations' checks read an anil figure, so it plans anil's figures too;
    anil does not plan anil-ablations', nor does any tier but those two plan either."""
    path = toy(tmp_path) / "toy" / "experiments.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["figures"]["sat"] = figure({"a": {"optimizer.lr": 0.4}}, tier="anil")
    doc["figures"]["abl"] = figure({"a": {"optimizer.lr": 0.4}, "b": {"optimizer.lr": 0.2}}, tier="anil-ablations")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    small, sat, abl = ("toy", "small"), ("toy", "sat"), ("toy", "abl")
    got = {tier: set(load_plan(tmp_path, "embedded", tier=tier).figures) for tier in ("default", "anil", "anil-ablations", "paper")}
    assert got == {"default": {small}, "anil": {small, sat}, "anil-ablations": {small, sat, abl},
                   "paper": {small, ("toy", "big")}}


def test_each_other_tier_plans_the_default_figures_and_its_own_not_the_others(tmp_path):
    toy3(tmp_path)
    small, big, pilot = ("toy", "small"), ("toy", "big"), ("toy", "pilot")
    plans = {tier: load_plan(tmp_path, "embedded", tier=tier) for tier in TIERS}
    assert {tier: set(plan.figures) for tier, plan in plans.items()} == {
        "default": {small}, "paper": {small, big}, "decisive": {small, pilot}, "real": {small},
        "real-sun": {small}, "real-sun-k8": {small}, "anil": {small}, "anil-ablations": {small}}
    assert plans["default"].tier_of == {small: "default", big: "paper", pilot: "decisive"}
    # a figure of a tier not asked for: one line naming its own tier's switch
    for tier, fig, other in (("default", "pilot", "decisive"), ("paper", "pilot", "decisive"), ("decisive", "big", "paper")):
        target = f"results/embedded/toy/{fig}_curves.csv"
        assert unplanned_target(plans[tier], "results", target) == (
            f"{target}: toy {fig} is a {other}-tier figure: add --config tier={other} (make replicate TIER={other})")
    assert unplanned_target(plans["decisive"], "results", "results/embedded/toy/pilot.png") is None
    # the full scale plans every figure, whatever the tier
    path = tmp_path / "toy" / "experiments.yaml"
    doc = yaml.safe_load(path.read_text())
    for fig in doc["figures"].values():
        fig["scales"]["full"] = fig["scales"]["embedded"]
    path.write_text(yaml.safe_dump(doc))
    for tier in TIERS:
        assert set(load_plan(tmp_path, "full", tier=tier).figures) == {small, big, pilot}
    assert check({"tier": "decisive"}).tier == "decisive"


def test_every_tier_at_once_plans_every_figure_and_is_not_a_tier_a_user_asks_for(tmp_path):
    toy3(tmp_path)
    every = load_plan(tmp_path, "embedded", tier=EVERY_TIER)
    assert set(every.figures) == {("toy", "small"), ("toy", "big"), ("toy", "pilot")}
    by_tier = [set(load_plan(tmp_path, "embedded", tier=t).configs) for t in TIERS]
    assert set(every.configs) == set().union(*by_tier) and len(by_tier[0]) < len(every.configs)
    with pytest.raises(WorkflowConfigError, match="tier"):
        check({"tier": EVERY_TIER})


def test_a_typo_in_a_paper_tier_claim_still_fails_the_paper_tier_plan(tmp_path):
    toy(tmp_path)
    path = tmp_path / "toy" / "experiments.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["claims"][1]["b"] = "bb"
    path.write_text(yaml.safe_dump(doc))
    load_plan(tmp_path, "embedded")   # not planned in the default tier: its names are not checked there
    with pytest.raises(ExperimentsError, match="claim 'c-big'.*series 'bb' does not exist"):
        load_plan(tmp_path, "embedded", tier="paper")


def test_a_seed_offset_shifts_every_seed_list_and_every_run_id(tmp_path):
    base = load_plan(toy(tmp_path), "embedded", tier="paper")
    fresh = load_plan(tmp_path, "embedded", tier="paper", seed_offset=100)
    assert sorted({r.seed for f in fresh.figures.values() for r in f.runs}) == [100, 101, 102]
    assert not set(base.configs) & set(fresh.configs) and len(fresh.configs) == len(base.configs)
    assert all(c.seed >= 100 and c.name.endswith(f"seed{c.seed}") for c in fresh.configs.values())
    manifest = fresh.figure_manifest("toy", "small", "r")
    assert manifest["seed_offset"] == 100
    assert "seed_offset" not in base.figure_manifest("toy", "small", "r")   # committed manifests unchanged
    # an offset that maps the seeds onto declared ones would reuse committed runs: refused
    with pytest.raises(ExperimentsError, match=r"seed_offset 2 maps \[0, 1, 2\] onto \[2, 3, 4\].*above 2"):
        load_plan(tmp_path, "embedded", seed_offset=2)


@pytest.mark.parametrize("config, message", [
    ({"seed_offset": 100, "results": "results"}, "--config: seed_offset: fresh seeds go to their own results root"),
    ({"seed_offset": -1, "results": "r"}, "--config seed_offset=-1:"),
    ({"tier": "papr"}, "--config tier='papr':"),
])
def test_workflow_config_refuses_fresh_seeds_in_the_reference_and_unknown_tiers(config, message):
    with pytest.raises(WorkflowConfigError) as e:
        check(config)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert check({"tier": "paper", "seed_offset": 1000, "results": "results-seeds+1000"}).seed_offset == 1000


def curves(series_values: dict) -> pd.DataFrame:
    return pd.DataFrame([{"series": s, "seed": seed, "model": "0", "step": 10, "wall_s": 0.0,
                          "metric": "val_loss", "val_loss": v}
                         for s, values in series_values.items() for seed, v in enumerate(values)])


def write_figure(d: Path, fig: str, offset: int = 0):
    curves({"a": [1.0, 1.1, 1.2], "b": [2.0, 2.0, 2.0]}).to_csv(d / f"{fig}_curves.csv", index=False)
    runs = [{"series": s, "seed": i} for s in "ab" for i in range(3)]
    (d / f"{fig}_runs.json").write_text(json.dumps({"panels": ["val_loss"], "runs": runs, "configs": {},
                                                    **({"seed_offset": offset} if offset else {})}))


def test_a_decisive_tier_claim_names_its_tier_untested_and_tested(tmp_path):
    spec = toy3(tmp_path / "spec") / "toy" / "experiments.yaml"
    figs = tmp_path / "figs"
    figs.mkdir()
    write_figure(figs, "small")
    write_figure(figs, "big")
    claims.read_manifest.cache_clear()
    claims.read_table.cache_clear()
    df = claims.evaluate(spec, figs, "embedded").set_index("id")   # as the paper tier leaves it
    assert df.loc["c-pilot", "verdict"] == ("not tested in this tier: figure 'pilot' is in the decisive tier "
                                            "(make replicate TIER=decisive)")
    assert list(df["tier"]) == ["default", "paper", ""]
    write_figure(figs, "pilot")
    claims.read_manifest.cache_clear()
    claims.read_table.cache_clear()
    df = claims.evaluate(spec, figs, "embedded").set_index("id")
    assert list(df["tier"]) == ["default", "paper", "decisive"] and df.loc["c-pilot", "verdict"] == "holds"
    assert "| holds (decisive tier) |" in claims.compact_table(df.reset_index())


def test_claims_say_which_tier_tested_them_and_whether_the_seeds_were_fresh(tmp_path):
    spec = toy(tmp_path / "spec") / "toy" / "experiments.yaml"
    figs = tmp_path / "figs"
    figs.mkdir()
    write_figure(figs, "small")
    df = claims.evaluate(spec, figs, "embedded").set_index("id")
    # the paper tier's tables are absent: its claim is not tested in this tier, never an error
    assert df.loc["c-big", "verdict"] == "not tested in this tier: figure 'big' is in the paper tier (make replicate TIER=paper)"
    assert df.loc["c-big", "tier"] == "" and df.loc["c-small", "tier"] == "default"
    assert df.loc["c-small", "verdict"] == "holds" and df.loc["c-small", "seeds"] == "declared"
    write_figure(figs, "big", offset=1000)
    claims.read_manifest.cache_clear()
    claims.read_table.cache_clear()
    df = claims.evaluate(spec, figs, "embedded").set_index("id")
    assert df.loc["c-big", "tier"] == "paper" and df.loc["c-big", "verdict"] == "holds"
    assert df.loc["c-big", "seeds"] == "declared + 1000 (fresh seeds, not the committed runs)"
    text = claims.compact_table(df.reset_index())
    assert "| holds (paper tier, fresh seeds) |" in text and "| holds |" in text


def test_verify_in_the_default_tier_leaves_the_paper_tier_tables_and_claims_out():
    big = {("toy", "big")}
    assert of_figures(Path("toy/big_curves.csv"), big) and of_figures(Path("toy/big.csv"), big)
    assert not of_figures(Path("toy/big2.csv"), big) and not of_figures(Path("toy/small_values.csv"), big)
    committed = pd.DataFrame({"id": ["c-small", "c-big"], "tier": ["default", "paper"], "verdict": ["holds", "holds"]})
    fresh = pd.DataFrame({"id": ["c-small", "c-big"], "tier": ["default", ""],
                          "verdict": ["holds", "not tested in this tier: figure 'big' ..."]})
    assert default_tier_rows(committed).equals(default_tier_rows(fresh))
    assert list(default_tier_rows(committed)["id"]) == ["c-small"]


def test_verify_in_one_tier_leaves_the_other_tiers_tables_and_claims_out(monkeypatch, capsys):
    committed = pd.DataFrame({"id": ["c-small", "c-big", "c-pilot", "c-far"], "tier": ["default", "paper", "decisive", ""],
                              "verdict": ["holds", "holds", "holds", "not tested at this scale: no full runs"]})
    assert list(default_tier_rows(committed)["id"]) == ["c-small", "c-far"]
    assert list(default_tier_rows(committed, "paper")["id"]) == ["c-small", "c-big", "c-far"]
    assert list(default_tier_rows(committed, "decisive")["id"]) == ["c-small", "c-pilot", "c-far"]
    fresh = committed.copy()   # as the paper tier writes it: the decisive figure's claim not tested
    fresh.loc[2, ["tier", "verdict"]] = ["", "not tested in this tier: figure 'pilot' is in the decisive tier ..."]
    assert default_tier_rows(committed, "paper").equals(default_tier_rows(fresh, "paper"))
    monkeypatch.setattr(sys, "argv", ["verify.py", "--tier", "decisiv"])   # --tier's choices: schema.TIERS
    with pytest.raises(SystemExit) as e:
        verify_main()
    assert e.value.code == 2 and ("(choose from 'default', 'paper', 'decisive', 'real', 'real-sun', 'real-sun-k8', "
                                  "'anil', 'anil-ablations')") in capsys.readouterr().err
    # a tier keeps the rows of the tiers it builds on (schema.BUILDS_ON), which it regenerates
    anil = pd.DataFrame({"id": ["c-small", "c-sat", "c-abl"], "tier": ["default", "anil", "anil-ablations"],
                         "verdict": ["holds"] * 3})
    assert list(default_tier_rows(anil, "anil-ablations")["id"]) == ["c-small", "c-sat", "c-abl"]
    assert list(default_tier_rows(anil, "anil")["id"]) == ["c-small", "c-sat"]


def test_make_passes_tier_and_seeds_to_the_workflow():
    out = subprocess.run(["make", "-n", "replicate", "verify", "TIER=paper", "SEEDS=1000"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60).stdout.replace("\\\n", " ")
    assert "--config results=results-seeds+1000 tier=paper seed_offset=1000" in " ".join(out.split())
    assert "workflows/verify.py --cores" in out and "--tier paper" in out
    plain = " ".join(subprocess.run(["make", "-n", "replicate"], cwd=ROOT, capture_output=True, text=True,
                                    timeout=60).stdout.replace("\\\n", " ").split())
    assert "--config results=results-local" in plain and "tier=" not in plain and "seed_offset" not in plain


def test_the_real_workflow_plans_the_paper_tier_with_fresh_seeds(tmp_path):
    """A dry run of the real Snakefile on the toy paper: the paper tier adds the big figure's 6 runs."""
    snakemake = Path(sys.executable).with_name("snakemake")
    toy(tmp_path / "spec")

    def dry(*config):
        p = subprocess.run([str(snakemake), "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                            "--config", f"replications={tmp_path / 'spec'}", *config],
                           capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout + p.stderr
    rc, out = dry("results=r")
    assert rc == 0 and " 6 " in out.split("Job stats:")[1].split("train")[1].splitlines()[0] + " ", out
    rc, out = dry("results=r2", "tier=paper", "seed_offset=100")
    assert rc == 0 and " 12 " in out.split("Job stats:")[1].split("train")[1].splitlines()[0] + " ", out


def test_make_replicate_compares_a_paper_tier_claim_as_not_in_this_tier(tmp_path):
    from compare import compare_claims
    cols = {"paper": ["toy", "toy"], "id": ["c-small", "c-big"], "measure": ["final", "final"], "n": [3, 3],
            "effect_mean": [0.9, 0.9], "effect_sd": [0.1, 0.1], "interval_low": [0.7, 0.7], "interval_high": [1.1, 1.1]}
    pd.DataFrame({**cols, "verdict": ["holds", "holds"]}).to_csv(tmp_path / "ref.csv", index=False)
    local = pd.DataFrame({**cols, "verdict": ["holds", "not tested in this tier: figure 'big' is in the paper tier"]})
    local.loc[1, ["n", "effect_mean", "effect_sd", "interval_low", "interval_high"]] = [0, None, None, None, None]
    local.to_csv(tmp_path / "loc.csv", index=False)
    rows = {r["name"]: r for r in compare_claims(tmp_path / "ref.csv", tmp_path / "loc.csv")}
    assert rows["toy c-big"]["outcome"] == "not run in this tier" and rows["toy c-big"]["reference"] == "holds"
    assert rows["toy c-small"]["outcome"] == "bit-identical"
