"""Pre-registration as a mechanism (analysis/preregistration.py): a claim's design read from git at every
commit of its experiments file, the commit that fixed it, and every design change made after its
figure's results were committed, which replications/design_changes.yaml must declare with a reason.

A throw-away git repository with a toy paper exercises each side of the rule; the last tests hold the
real repository to it."""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import preregistration as pr  # noqa: E402

BASE = {"workload": {"name": "cifar"}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
        "launch": {"device": "cpu"}}


def spec(**change) -> dict:
    claim = {"id": "c", "claim": "a beats b", "source": "Fig. 0", "figure": "f", "basis": "step-matched",
             "measure": "final", "metric": "val_loss", "a": "a", "b": "b", "at_least": 0.0,
             "regime": [{"check": "b plateaued", "quantity": "last_gain", "series": "b", "max": 0.01,
                         "source": "Fig. 0"}]}
    series = {"a": {"optimizer.lr": 0.2}, "b": {}, "unrelated": {"optimizer.lr": 0.5}}
    doc = {"paper": "toy", "source": "t", "claims": [claim],
           "figures": {"f": {"title": "t", "kind": "curves",
                             "scales": {"embedded": {"base": BASE, "seeds": [0, 1, 2], "series": series}}}}}
    for path, value in change.items():   # "claims.0.at_least" -> doc["claims"][0]["at_least"]
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[int(last) if isinstance(node, list) else last] = value
    return doc


class Repo:
    def __init__(self, root: Path):
        self.root = root
        self.git("init", "-q")
        (root / "replications" / "toy").mkdir(parents=True)
        (root / "results" / "embedded" / "toy").mkdir(parents=True)
        self.paper = root / "replications" / "toy" / "experiments.yaml"

    def git(self, *args) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=self.root,
                              capture_output=True, text=True, check=True).stdout

    def commit(self, doc=None, results=None, ledger=None) -> str:
        if doc is not None:
            self.paper.write_text(yaml.safe_dump(doc, sort_keys=False))
        if results is not None:
            (self.root / "results/embedded/toy/f_curves.csv").write_text(results)
        if ledger is not None:
            (self.root / "replications" / pr.LEDGER).write_text(yaml.safe_dump(ledger))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "x")
        return self.git("rev-parse", "HEAD").strip()

    def record(self) -> pr.Record:
        return pr.records(self.paper)["c"]


@pytest.fixture
def repo(tmp_path):
    return Repo(tmp_path)


def test_a_design_committed_before_its_results_is_pre_registered(repo):
    per_scale = {"claims.0.scales": {"embedded": {"regime": [{"check": "a plateaued", "quantity": "last_gain",
                                                              "series": "a", "max": 0.01, "source": "Fig. 0"}]}}}
    design = repo.commit(spec(**per_scale))
    results = repo.commit(results="series,seed\n")
    repo.commit(spec(**per_scale, **{"claims.0.claim": "a beats b, reworded", "claims.0.regime.0.source": "Fig. 0, line 3",
                                     "claims.0.regime.0.check": "renamed", "claims.0.scales.embedded.regime.0.why": "x",
                                     "figures.f.scales.embedded.base":
                                     {**BASE, "launch": {"device": "cpu", "launcher": "warm"},    # wording, launch and
                                      "train": {**BASE["train"], "checkpoint_every": 5, "save_model": False}}}))  # what run ids leave out
    repo.commit(spec(**per_scale, **{"figures.f.scales.embedded.series.unrelated": {"optimizer.lr": 0.9}}))  # a series it never reads
    rec = repo.record()
    assert (rec.design_commit, rec.results_commit, rec.relation) == (design, results, "before results")
    assert rec.after_results == [] and rec.design_results == results
    assert pr.status_text(rec) == f"before results (first results {results[:7]}); " \
                                  f"results of this design first committed at {results[:7]}"


@pytest.mark.parametrize("change, key", [
    ({"claims.0.at_least": -0.01}, "at_least"),                                        # a margin
    ({"claims.0.regime.0.max": 0.02}, "regime"),                                       # a threshold
    ({"figures.f.scales.embedded.seeds": [0, 1, 2, 3]}, "runs.f.seeds"),               # seeds
    ({"figures.f.scales.embedded.base": {**BASE, "train": {**BASE["train"], "steps": 20}}},
     "runs.f.series.a.train.steps, runs.f.series.b.train.steps"),                      # a run length
    ({"figures.f.scales.embedded.series.b": {"optimizer.weight_decay": 0.1}}, "runs.f.series.b.optimizer"),
    ({"claims.0.full_scale_only": "needs 128 workers"}, "full_scale_only"),            # declared untestable
])
def test_a_design_change_after_results_must_be_declared(repo, change, key):
    repo.commit(spec())
    results = repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**change))
    rec = repo.record()
    assert (rec.design_commit, rec.relation, rec.after_results) == (changed, "after results", [changed])
    assert rec.changes[changed].startswith(key)
    assert pr.undeclared(rec, []) == [changed]
    assert pr.row_note(rec, []) == f"{changed[:7]} ({rec.changes[changed]}): NOT DECLARED"
    entry = {"commit": changed[:7], "why": "the smoke run showed it", "claims": ["c"]}
    assert pr.undeclared(rec, [entry]) == [] and pr.undeclared(rec, [{**entry, "claims": None}]) == []
    assert pr.undeclared(rec, [{**entry, "claims": ["other"]}]) == [changed]    # another claim's entry
    assert pr.undeclared(rec, [{**entry, "commit": results[:7]}]) == [changed]  # another commit's entry
    assert pr.row_note(rec, [entry]) == f"{changed[:7]} ({rec.changes[changed]}): the smoke run showed it"
    assert results != changed


def test_a_claim_moved_to_a_new_figure_has_still_seen_the_old_ones_results(repo):
    repo.commit(spec())
    results = repo.commit(results="series,seed\n")
    doc = spec(**{"claims.0.figure": "g"})
    doc["figures"]["g"] = doc["figures"]["f"]     # new runs (a figure without results yet), same series
    moved = repo.commit(doc)
    rec = repo.record()
    assert (rec.results_commit, rec.after_results, rec.relation) == (results, [moved], "after results")


def test_a_design_fixed_in_the_commit_of_its_results_or_not_yet_committed(repo):
    both = repo.commit(spec(), results="series,seed\n")
    rec = repo.record()
    assert (rec.relation, rec.after_results) == ("with results", [])     # git cannot show it came first
    assert rec.design_results == both and pr.status_text(rec) == \
        f"with results (first results {both[:7]}); results of this design first committed at {both[:7]}"
    repo.paper.write_text(yaml.safe_dump(spec(**{"claims.0.at_least": 0.5})))
    assert repo.record().relation == "uncommitted" and both



def test_a_preset_s_run_config_is_part_of_the_design(repo):
    preset = repo.root / "replications" / "presets" / "x.yaml"
    preset.parent.mkdir()
    # the scale's base (train: steps, batch, evaluation) is merged over the preset's train section, key by key
    preset.write_text(yaml.safe_dump({"optimizer": {"lr": 0.1, "momentum": 0.9}, "train": {"warmup_steps": 5}}))
    repo.commit(spec(**{"figures.f.scales.embedded.preset": "presets/x.yaml"}))
    results = repo.commit(results="series,seed\n")
    assert repo.record().relation == "before results"
    preset.write_text(yaml.safe_dump({"optimizer": {"lr": 0.1, "momentum": 0.0}, "train": {"warmup_steps": 0}}))
    assert repo.record().relation == "uncommitted"                                  # the preset alone changed
    changed = repo.commit()
    rec = repo.record()
    assert (rec.design_commit, rec.results_commit, rec.relation) == (changed, results, "after results")
    assert rec.changes[changed] == ("runs.f.series.a.optimizer.momentum, runs.f.series.a.train.warmup_steps, "
                                    "runs.f.series.b.optimizer.momentum, runs.f.series.b.train.warmup_steps")


def test_a_preset_that_cannot_be_read_is_the_same_design_everywhere_not_an_error(repo):
    repo.commit(spec(**{"figures.f.scales.embedded.preset": "presets/none.yaml"}))   # neither in git nor on disk
    results = repo.commit(results="series,seed\n")
    rec = repo.record()
    assert (rec.results_commit, rec.relation, rec.after_results) == (results, "before results", [])


def test_a_regime_check_on_another_figure_reads_that_figure_s_runs(repo):
    # a check on figure g that names no series reads the claim's a and b there: their runs are part of the design
    # (a check on figure h, which has no runs at this scale, before it)
    doc = spec(**{"claims.0.regime": [{"check": "h at full scale only", "figure": "h", "quantity": "last_gain",
                                       "max": 0.01, "source": "Fig. 2"},
                                      {"check": "b plateaued in g", "figure": "g", "quantity": "last_gain",
                                       "max": 0.01, "source": "Fig. 1"}]})
    doc["figures"]["g"] = yaml.safe_load(yaml.safe_dump(doc["figures"]["f"]))
    doc["figures"]["h"] = {"title": "h", "kind": "curves", "scales": {"full": doc["figures"]["g"]["scales"]["embedded"]}}
    repo.commit(doc)
    repo.commit(results="series,seed\n")
    doc["figures"]["g"]["scales"]["embedded"]["series"].update(a={"optimizer.lr": 0.25}, b={"optimizer.lr": 0.3})
    changed = repo.commit(doc)
    rec = repo.record()
    assert (rec.relation, rec.after_results) == ("after results", [changed])
    assert rec.changes[changed] == "runs.g.series.a.optimizer.lr, runs.g.series.b.optimizer"



def test_a_teacher_run_a_series_reads_is_part_of_the_design(repo):
    # a distilled student reads its teacher's run ("@name"): a change of the teacher's config changes the design
    doc = spec(**{"figures.f.scales.embedded.series.a": {"algorithm.name": "distill", "algorithm.teacher_run": "@t"},
                  "figures.f.scales.embedded.series.t": {"optimizer.lr": 0.3}})
    repo.commit(doc)
    repo.commit(results="series,seed\n")
    doc["figures"]["f"]["scales"]["embedded"]["series"]["t"] = {"optimizer.lr": 0.4}
    changed = repo.commit(doc)
    rec = repo.record()
    assert (rec.relation, rec.after_results, rec.changes[changed]) == ("after results", [changed],
                                                                       "runs.f.series.t.optimizer.lr")



def test_students_of_one_teacher_bring_every_run_into_the_design():
    # three students of teacher t (the claim's a and b, a check's d): the walk over "@" references reaches all four
    student = {"algorithm.name": "distill", "algorithm.teacher_run": "@t"}
    doc = spec(**{"figures.f.scales.embedded.series": {"a": student, "b": student, "d": student, "t": {}},
                  "claims.0.regime": [{"check": "d plateaued", "quantity": "last_gain", "series": "d", "max": 0.01}]})
    d = pr.claim_design(doc, "c", "embedded", lambda name: {})
    assert sorted(d["runs"]["f"]["series"]) == ["a", "b", "d", "t"]


def test_the_run_b_is_offset_by_is_part_of_the_design(repo):
    # b_offset "@u": b starts after u's steps (anil2018's student after phase 1), so u's config is part of the design
    doc = spec(**{"claims.0.b_offset": "@u", "figures.f.scales.embedded.series.u": {"train.steps": 5}})
    repo.commit(doc)
    repo.commit(results="series,seed\n")
    doc["figures"]["f"]["scales"]["embedded"]["series"]["u"] = {"train.steps": 6}
    changed = repo.commit(doc)
    assert repo.record().changes[changed] == "runs.f.series.u.train.steps"


def test_a_malformed_declaration_in_an_old_commit_is_read_not_a_crash(repo):
    repo.commit(spec(**{"claims.0.sequential": {"looks": "3, 5"}}))    # a string, fixed later
    repo.commit(results="series,seed\n")
    fixed = repo.commit(spec(**{"claims.0.sequential": {"looks": [3, 5]}}))
    rec = repo.record()
    assert (rec.after_results, rec.changes[fixed]) == ([fixed], "runs.f.continued_seeds, sequential.looks")


def test_an_uncommitted_move_to_a_figure_with_results_has_seen_them(repo):
    doc = spec()
    doc["figures"]["g"] = doc["figures"]["f"]
    repo.commit(doc)
    (repo.root / "results/embedded/toy/g_curves.csv").write_text("series,seed\n")
    g_results = repo.commit()
    doc["claims"][0]["figure"] = "g"
    repo.paper.write_text(yaml.safe_dump(doc, sort_keys=False))     # not committed
    rec = repo.record()
    assert (rec.relation, rec.results_commit) == ("uncommitted", g_results)


def test_a_change_deep_in_a_run_config_names_its_first_six_levels(repo):
    repo.commit(spec(**{"figures.f.scales.embedded.series.a": {"optimizer.lr": 0.2, "workload.data.noise": 0.1}}))
    repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**{"figures.f.scales.embedded.series.a": {"optimizer.lr": 0.2, "workload.data.noise": 0.2}}))
    assert repo.record().changes[changed] == "runs.f.series.a.workload.data"


def test_a_change_of_many_keys_names_the_first_six(repo):
    repo.commit(spec())
    repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**{"claims.0.at_least": -0.1, "claims.0.basis": "wall-matched", "claims.0.measure": "best",
                                  "claims.0.metric": "val_accuracy", "claims.0.models": 2, "claims.0.offsets": [1],
                                  "claims.0.target": 0.5}))
    assert repo.record().changes[changed] == "at_least, basis, measure, metric, models, offsets"


def test_the_command_line_prints_each_claim_s_design_and_what_is_not_declared(repo, capsys):
    repo.commit(spec())
    results = repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**{"claims.0.at_least": -0.01}))
    assert pr.main([str(repo.paper)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"c: design {changed[:9]}: after results (first results {results[:7]})",
        f"    after results: {changed[:9]} changed at_least  NOT DECLARED in {pr.LEDGER}"]
    repo.commit(ledger={"toy": [{"commit": changed[:8], "why": "because", "claims": ["c"]}]})
    assert pr.main([str(repo.paper), "--scale", "embedded"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"    after results: {changed[:9]} changed at_least"
    with pytest.raises(SystemExit) as e:
        pr.main(["--help"])
    assert e.value.code == 0 and "When each claim's design was fixed, from git" in capsys.readouterr().out


def test_the_claims_table_carries_the_design_columns(repo, tmp_path):
    import claims
    import pandas as pd
    repo.commit(spec())
    repo.commit(results="series,seed\n")
    changed = repo.commit(spec(**{"claims.0.at_least": -0.01}),
                          ledger=None)
    repo.commit(ledger={"toy": [{"commit": changed[:8], "why": "because", "claims": ["c"]}]})
    figs = tmp_path / "figs"
    figs.mkdir()
    pd.DataFrame([{"series": s, "seed": i, "model": "0", "step": 10, "wall_s": 0, "metric": "val_loss",
                   "val_loss": v + 0.01 * i} for s, v in (("a", 1.0), ("b", 2.0)) for i in range(3)]
                 ).to_csv(figs / "f_curves.csv", index=False)
    (figs / "f_runs.json").write_text('{"panels": ["val_loss"], "runs": [], "configs": {}}')
    row = claims.evaluate(repo.paper, figs, "embedded").iloc[0]
    assert row["design_commit"] == changed[:9] and row["design_status"].startswith("after results (first results ")
    assert row["changed_after_results"] == f"{changed[:7]} (at_least): because"


def test_without_the_whole_history_no_design_is_claimed(repo, tmp_path_factory):
    repo.commit(spec())
    repo.commit(results="series,seed\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")   # outside the repository's tree
    shallow = elsewhere / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}", str(shallow)], check=True)
    assert pr.records(shallow / "replications" / "toy" / "experiments.yaml") == {}
    plain = elsewhere / "plain" / "replications" / "toy"     # not a checkout at all (an unpacked archive)
    plain.mkdir(parents=True)
    plain.joinpath("experiments.yaml").write_text(repo.paper.read_text())
    assert pr.records(plain / "experiments.yaml") == {}
    assert pr.status_text(pr.Record("c")) == "no git history"   # a record nothing was read into says so


def test_without_git_installed_no_design_is_claimed(repo, tmp_path_factory, monkeypatch):
    repo.commit(spec())
    monkeypatch.setenv("PATH", str(tmp_path_factory.mktemp("no-git")))   # no git executable to run
    assert pr.records(repo.paper) == {}


@pytest.mark.parametrize("entry, message", [
    ({"commit": "7e95398"}, "expected keys commit, why"),
    ({"commit": "7e95", "why": "x"}, "commit: at least 7 hex digits"),
    ({"commit": "7e9539", "why": "x"}, "commit: at least 7 hex digits"),
    ({"commit": "7e95398", "why": " "}, "why: say why"),
    ({"commit": "7e95398", "why": "x", "reason": "y"}, "expected keys commit, why"),
])
def test_a_malformed_ledger_entry_is_one_line_naming_it(tmp_path, entry, message):
    (tmp_path / pr.LEDGER).write_text(yaml.safe_dump({"toy": [entry]}))
    with pytest.raises(pr.LedgerError) as e:
        pr.ledger(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / pr.LEDGER}: toy[0]: ") and message in str(e.value)


@functools.lru_cache(maxsize=None)
def real_records(paper: str) -> dict:
    """The repository's records, read from git once for both tests below."""
    return pr.records(ROOT / "replications" / paper / "experiments.yaml")


@pytest.mark.parametrize("paper", ["anil2018", "sodhani2020", "sun2016"])
def test_every_post_results_change_of_the_real_claims_is_declared(paper):
    """The rule on this repository: every design change after a claim's figure had committed results
    is in replications/design_changes.yaml with its reason."""
    entries = pr.ledger(ROOT / "replications").get(paper, [])
    missing = [f"{paper} {cid}: {c[:7]} changed {rec.changes[c]}"
               for cid, rec in real_records(paper).items()
               for c in pr.undeclared(rec, entries)]
    assert not missing, (f"design changes after results, not declared in replications/{pr.LEDGER} "
                         "(add commit, why, claims):\n" + "\n".join(missing))


def test_every_ledger_entry_explains_a_real_post_results_change():
    """No entry that names a commit which changed none of its claims' designs after results."""
    stale = []
    for paper, entries in pr.ledger(ROOT / "replications").items():
        recs = real_records(paper)
        for e in entries:
            covered = [cid for cid, rec in recs.items() if (e.get("claims") is None or cid in e["claims"])
                       and any(c.startswith(e["commit"]) for c in rec.after_results)]
            if not covered or (e.get("claims") and len(covered) != len(e["claims"])):
                stale.append(f"{paper} {e['commit']} {e.get('claims')}: covers {covered}")
    assert not stale, "\n".join(stale)
