"""The workflow's plan: experiments files -> runs, and Snakemake dry runs of the real Snakefile.

Dry runs use `--directory tmp_path`, so they see no results (every job is listed) and never
take the repository's Snakemake lock. Nothing is trained here.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from experiments import ExperimentsError, load_plan  # noqa: E402

SNAKEMAKE = Path(sys.executable).with_name("snakemake")

BASE = {"workload": {"name": "cifar"}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
        "launch": {"device": "cpu"}}


def toy_paper(root: Path, figures: dict, paper: str = "toy", claims=None) -> Path:
    """Write root/<paper>/experiments.yaml with `figures` (and `claims`); returns root."""
    (root / paper).mkdir(parents=True, exist_ok=True)
    doc = {"paper": paper, "source": "a test", "figures": figures, **({"claims": claims} if claims else {})}
    (root / paper / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def figure(series: dict, seeds=(0,), scale="embedded", base=BASE) -> dict:
    return {"title": "t", "source": "Fig. 0", "kind": "curves",
            "scales": {scale: {"base": base, "seeds": list(seeds), "series": series}}}


def shared_figures() -> dict:
    """Two figures that share the series 'w1' (same overrides, so the same run)."""
    return {"figA": figure({"w1": {"parallel.world_size": 1}, "w2": {"parallel.world_size": 2}}),
            "figB": figure({"w1 again": {"parallel.world_size": 1}, "lr": {"optimizer.lr": 0.3}})}


# ---------------------------------------------------------------- the parser

def test_shared_run_is_planned_once(tmp_path):
    plan = load_plan(toy_paper(tmp_path, shared_figures()), "embedded")
    a, b = plan.figure("toy", "figA"), plan.figure("toy", "figB")
    assert a.runs[0].run_id == b.runs[0].run_id
    assert len({r.run_id for f in (a, b) for r in f.runs}) == 3 == len(plan.configs)
    assert plan.config(a.runs[1].run_id).parallel.world_size == 2
    assert plan.config(b.runs[1].run_id).optimizer.lr == 0.3
    manifest = plan.figure_manifest("toy", "figB", "res")
    assert [r["run_dir"] for r in manifest["runs"]] == [f"res/embedded/runs/{r.run_id}" for r in b.runs]


def test_seeds_make_distinct_runs_and_threads_are_capped(tmp_path):
    plan = load_plan(toy_paper(tmp_path, {"f": figure({"w4": {"parallel.world_size": 4}}, seeds=[0, 1])}),
                     "embedded")
    runs = plan.figure("toy", "f").runs
    assert [r.seed for r in runs] == [0, 1] and runs[0].run_id != runs[1].run_id
    assert plan.threads(runs[0].run_id, cores=2) == 2
    assert plan.threads(runs[0].run_id, cores=64) >= 4


def test_same_run_with_different_launch_settings_is_an_error(tmp_path):
    figs = {"figA": figure({"a": {}}), "figB": figure({"b": {"launch.oversubscribe": True}})}
    with pytest.raises(ExperimentsError, match="declared twice"):
        load_plan(toy_paper(tmp_path, figs), "embedded")


def test_invalid_series_error_names_paper_figure_scale_series(tmp_path):
    figs = {"good": figure({"ok": {}}, scale="full"),
            "bad": figure({"ok": {}, "broken": {"optimizer.lr": -1}}, scale="full")}
    toy_paper(tmp_path, figs)
    load_plan(toy_paper(tmp_path / "other", {"f": figure({"ok": {}})}), "embedded")
    with pytest.raises(ExperimentsError) as e:
        load_plan(tmp_path, "full")
    msg = str(e.value)
    assert "toy bad" in msg and "scale 'full'" in msg and "'broken'" in msg and "optimizer.lr" in msg
    assert "'ok'" not in msg


def test_invalid_scale_is_only_an_error_when_requested(tmp_path):
    fig = figure({"ok": {}})
    fig["scales"]["full"] = {"base": {"workload": {"name": "no_such_workload"}}, "seeds": [0], "series": {"s": {}}}
    plan = load_plan(toy_paper(tmp_path, {"f": fig}), "embedded")
    assert list(plan.figures) == [("toy", "f")]
    with pytest.raises(ExperimentsError, match="no_such_workload"):
        load_plan(tmp_path, "full")


def test_format_errors(tmp_path):
    toy_paper(tmp_path / "b", {"f": figure({"s": {}})}, paper="toy")
    (tmp_path / "b" / "toy").rename(tmp_path / "b" / "other_name")
    with pytest.raises(ExperimentsError, match="folder name"):
        load_plan(tmp_path / "b", "embedded")
    with pytest.raises(ExperimentsError, match="kind"):
        load_plan(toy_paper(tmp_path / "c", {"f": {**figure({"s": {}}), "kind": "pie"}}), "embedded")
    with pytest.raises(ExperimentsError, match="declared scales: embedded"):
        load_plan(toy_paper(tmp_path / "d", {"f": figure({"s": {}})}), "fulll")
    with pytest.raises(ExperimentsError, match="unknown key"):
        load_plan(toy_paper(tmp_path / "e", {"f": {**figure({"s": {}}), "colour": "red"}}), "embedded")
    with pytest.raises(ExperimentsError, match="seeds list"):
        load_plan(toy_paper(tmp_path / "f", {"f": figure({"s": {"seed": 3}})}), "embedded")


CLAIM = {"id": "c", "claim": "w2 beats w1", "figure": "figA", "basis": "step-matched", "measure": "final",
         "a": "w2", "b": "w1"}


@pytest.mark.parametrize("change, message", [
    ({"a": "w3"}, r"claim 'c': figure 'figA', a: series 'w3' does not exist"),
    ({"figure": "figZ"}, r"claim 'c': figure 'figZ' is not a figure of the paper"),
    ({"b_model": "G"}, r"claim 'c': figure 'figA', b_model: model 'G'; series 'w1' has \['0'\]"),
    ({"measure": "finale"}, r"claim 'c' \(claims.0\), measure: Input should be 'final'"),
    ({"metric": "val_acuracy"}, r"claim 'c': figure 'figA', metric: 'val_acuracy' is not logged"),
    ({"regime": [{"check": "x", "source": "Fig. 1", "quantity": "epochs", "series": "w9", "min": 1}]},
     r"claim 'c': regime\[0\] \('x'\): series: series 'w9' is not in figure 'figA'"),
    ({"regime": [{"check": "x", "quantity": "epoch", "min": 1}]}, r"claim 'c' \(claims.0\), regime.0.quantity"),
])
def test_claim_typos_fail_the_plan_naming_file_figure_and_key(tmp_path, change, message):
    with pytest.raises(ExperimentsError, match=r"(?s)experiments.yaml:.*" + message):
        load_plan(toy_paper(tmp_path, shared_figures(), claims=[{**CLAIM, **change}]), "embedded")
    assert load_plan(toy_paper(tmp_path / "ok", shared_figures(), claims=[CLAIM]), "embedded")


def test_misspelt_row_fails_the_plan(tmp_path):
    fig = {**figure({"w1": {}}), "kind": "table", "columns": ["val_accuracy"],
           "rows": [{"label": "A", "series": "w1", "val_acuracy": 0.9}]}
    with pytest.raises(ExperimentsError, match=r"figure 'f', rows\[0\] \('A'\): key\(s\) \['val_acuracy'\]"):
        load_plan(toy_paper(tmp_path, {"f": fig}), "embedded")


# ---------------------------------------------------------------- Snakemake dry runs

def dry_run(workdir: Path, *args: str) -> tuple[int, str, dict[str, int]]:
    """(exit code, all output, job counts from 'Job stats') of a dry run of the real Snakefile."""
    proc = subprocess.run([str(SNAKEMAKE), "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
                           *args], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    stats = out.split("Job stats:", 1)[-1] if "Job stats:" in out else ""
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}
    return proc.returncode, out, counts


@pytest.mark.parametrize("setting, message", [
    ("scale=ful", "--config scale='ful': expected one of embedded, full"),
    ("scal=full", "--config: unknown key 'scal'; allowed keys: scale, results, replications"),
])
def test_a_bad_config_key_or_value_fails_at_once_naming_what_is_allowed(tmp_path, setting, message):
    rc, out, counts = dry_run(tmp_path, "--config", setting)
    assert rc != 0 and message in out and not counts, out


def test_default_target_with_the_local_profile(tmp_path):
    """One dry run checks both the default target and that the local profile is usable."""
    rc, out, counts = dry_run(tmp_path, "--profile", str(ROOT / "env/profiles/local"))
    assert rc == 0, out
    for ext in (".png", ".csv", ".md", "_curves.csv"):
        assert f"results/embedded/anil2018/fig2a{ext}" in out
    plan = load_plan(ROOT / "replications", "embedded")
    figures = len(plan.figures)
    tables = sum(f.kind == "table" for f in plan.figures.values())
    assert counts["train"] == counts["run_config"] == len(plan.configs), counts   # one per distinct run
    assert counts["aggregate"] == counts["plot"] == figures and counts["paper_table"] == tables, counts
    assert counts["claims"] == counts["notebook"] == 3 and counts["claims_all"] == 1, counts
    for name in ("claims.csv", "anil2018/claims.md", "sun2016/notebook.ipynb", "sodhani2020/fig2.png",
                 "sun2016/communication_paper.md"):
        assert f"results/embedded/{name}" in out
    assert "-m codist.cli run" in out   # printshellcmds: the profile was read
    assert "lm_data" not in counts   # no embedded run reads text: nothing to prepare, no job added


def test_run_shared_by_two_figures_is_one_train_job(tmp_path):
    reps = toy_paper(tmp_path / "reps", shared_figures())
    rc, out, counts = dry_run(tmp_path / "work", "--config", f"replications={reps}")
    assert rc == 0, out
    assert counts["train"] == 3 and counts["plot"] == 2 and counts["aggregate"] == 2, counts
    assert "notebook" not in counts   # the toy paper has no analysis/notebooks/toy.py


def test_a_claim_typo_fails_the_dry_run(tmp_path):
    reps = toy_paper(tmp_path / "reps", shared_figures(), claims=[{**CLAIM, "b": "w 1"}])
    rc, out, counts = dry_run(tmp_path / "work", "--config", f"replications={reps}")
    assert rc != 0 and "toy/experiments.yaml: claim 'c': figure 'figA', b: series 'w 1' does not exist" in out, out


def test_full_scale_dry_run_lists_every_planned_run_and_figure(tmp_path):
    rc, out, counts = dry_run(tmp_path, "--config", "scale=full")
    assert rc == 0, out[-3000:]
    plan = load_plan(ROOT / "replications", "full")
    trained = set(re.findall(r"^\s+wildcards: scale=full, run_id=(\w+)$", out, re.M))
    assert trained == set(plan.configs) and counts["train"] == counts["run_config"] == len(plan.configs), counts
    tables = sum(f.kind == "table" for f in plan.figures.values())
    assert counts["aggregate"] == counts["plot"] == len(plan.figures) and counts["paper_table"] == tables, counts
    assert counts["claims"] == counts["notebook"] == 3 and counts["claims_all"] == 1, counts
    for name in ("anil2018/fig1.png", "sun2016/cifar10_paper.md", "sodhani2020/fig6.png", "claims.md"):
        assert f"results/full/{name}" in out
    # an LM on text: its SentencePiece model and tokens are built by a job of its own (off the GPUs),
    # which the run's job waits for; no other run gets one
    text = {rid for rid, cfg in plan.configs.items() if cfg.workload.name == "lm" and cfg.workload.dataset == "text"}
    assert text and counts["lm_data"] == len(text), counts
    assert set(re.findall(r"^\s+output: results/full/lm_data/(\w+)\.done$", out, re.M)) == text
    for rid in text:
        job = re.search(rf"^rule train:\n(?:    .*\n)*?    output: results/full/runs/{rid}/", out, re.M)
        assert job and f"results/full/lm_data/{rid}.done" in job[0], rid


def test_embedded_stand_ins_are_distinct_tasks():
    """No two workloads generate the same embedded images (Sun's ImageNet stand-in was once the
    CIFAR-100 stand-in under another run id), and every embedded run fits the 2-core machine: 2 ranks,
    or one rank per model where a claim names its K (Sun's K = 4 / 8, oversubscribed)."""
    plan = load_plan(ROOT / "replications", "embedded")
    tasks: dict[tuple, set] = {}
    for cfg in plan.configs.values():
        w = cfg.workload
        assert cfg.parallel.world_size <= 2 or cfg.parallel.world_size == cfg.parallel.models <= 8, \
            f"{cfg.name}: {cfg.parallel.world_size} ranks on 2 cores"
        if w.name in ("cifar", "imagenet") and w.dataset == "embedded":
            size = w.image_size if w.name == "cifar" else w.embedded_image_size
            tasks.setdefault((w.classes, size, w.train_size, w.val_size, w.label_noise, w.data_seed), set()).add(w.name)
    shared = {k: v for k, v in tasks.items() if len(v) > 1}
    assert not shared, f"one embedded image task serves several workloads: {shared}"


def test_snakemake_lint_is_clean():
    proc = subprocess.run([str(SNAKEMAKE), "--lint", "-s", str(ROOT / "Snakefile")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out, out
