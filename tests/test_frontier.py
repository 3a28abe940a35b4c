"""The communication frontier (issue 16): Pareto front, the table builder on summary.json-shaped
runs, the plan from replications/frontier/frontier.yaml, and the workflow's dry run."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
sys.path.insert(0, str(ROOT / "workflows"))

import frontier_table  # noqa: E402
from experiments import load_plan  # noqa: E402
from frontier_pareto import pareto_front  # noqa: E402
from frontier_plan import FrontierError, add_to_plan, load_points  # noqa: E402
from frontier_walltime import NET  # noqa: E402

SPEC = ROOT / "replications" / "frontier" / "frontier.yaml"


# ---------------------------------------------------------------- Pareto front

def test_pareto_front_of_a_hand_made_table():
    #        bytes, accuracy: A dominates D (fewer bytes, better); B and C trade; E ties B exactly
    pts = [(100.0, 0.80), (10.0, 0.75), (1.0, 0.60), (200.0, 0.70), (10.0, 0.75), (1.0, 0.55)]
    assert pareto_front(pts, higher_is_better=True) == [True, True, True, False, True, False]


def test_pareto_front_when_lower_is_better():
    #        bytes, loss: the cheapest point with the lowest loss dominates everything else
    pts = [(100.0, 3.9), (10.0, 3.95), (1.0, 3.90), (1.0, 4.0)]
    assert pareto_front(pts, higher_is_better=False) == [False, False, True, False]


# ---------------------------------------------------------------- the table builder

STEPS, P, S = 1000, 307_488.0, 77_888.0


def summary(run_id, algorithm, models, quality, training_bytes, between_bytes, wall_s, seed):
    """A summary.json as train.py writes it (only the keys the frontier reads, plus a few)."""
    per_model = {m: {"final": {"step": STEPS, "val_accuracy": q}, "best": {"step": STEPS, "val_accuracy": q}}
                 for m, q in quality.items()}
    return {"run_id": run_id, "name": f"x-seed{seed}", "workload": "cifar", "algorithm": algorithm,
            "metric": "val_accuracy", "higher_is_better": True, "target": None, "headline_model": "0",
            "final_metric": quality["0"], "best_metric": quality["0"], "steps": STEPS, "samples": STEPS * 32,
            "world_size": 2, "wall_s": wall_s, "eval_s": 1.0, "setup_s": 0.5, "elapsed_s": wall_s + 2,
            "models": per_model,
            "comm": {"training_sent_bytes_all_ranks": training_bytes * 2 * STEPS,
                     "training_sent_bytes_per_rank_per_update": training_bytes,
                     "between_group_sent_bytes_per_rank_per_update": between_bytes, "by_category": {}}}


@pytest.fixture
def frontier_runs(tmp_path):
    """3 points x 3 seeds: all-reduce (1 model), codistill k=25, MA-DNN H=16 (its result: G)."""
    runs = []
    specs = [("all-reduce", "allreduce", None, None, "0", lambda s: {"0": 0.70 + s / 100}, P, 0.0),
             ("codistill k=25", "codistill", "k", 25, "0", lambda s: {"0": 0.72 + s / 100, "1": 0.5}, S / 25, S / 25),
             ("MA-DNN H=16", "model_average", "H", 16, "G",
              lambda s: {"0": 0.1, "1": 0.1, "G": 0.65 + s / 100}, S / 16 * 62 / 62.5, S / 16 * 62 / 62.5)]
    for i, (label, algo, knob, period, model, quality, train_b, between_b) in enumerate(specs):
        for seed in range(3):
            rid = f"{i:02d}{seed:010d}"
            d = tmp_path / "runs" / rid
            d.mkdir(parents=True)
            (d / "summary.json").write_text(json.dumps(
                summary(rid, algo, len(quality(seed)) - (model == "G"), quality(seed), train_b, between_b,
                        20.0 + seed, seed)))
            runs.append({"label": label, "algorithm": algo, "knob": knob, "period": period, "model": model,
                         "seed": seed, "run_id": rid, "run_dir": str(d), "shared_with": ""})
    manifest = {"workload": "image", "title": "t", "source": "s", "regime": "sun2016 cifar10",
                "bandwidths_gbps": [1, 10, 100], "left_out": ["PowerSGD: budget"], "runs": runs}
    path = tmp_path / "image_runs.json"
    path.write_text(json.dumps(manifest))
    return path


def test_table_builder_on_summary_files(frontier_runs, tmp_path):
    out = {k: tmp_path / f"image{k}" for k in (".csv", "_points.csv", ".md")}
    assert frontier_table.main(["--runs", str(frontier_runs), "--csv", str(out[".csv"]),
                                "--points", str(out["_points.csv"]), "--markdown", str(out[".md"])]) == 0
    runs, pts = pd.read_csv(out[".csv"]), pd.read_csv(out["_points.csv"])
    assert len(runs) == 9 and len(pts) == 3
    # the result model's quality, not the headline model's: MA-DNN reports G
    ma = runs[runs.label == "MA-DNN H=16"].sort_values("seed")
    assert list(ma.final_quality) == pytest.approx([0.65, 0.66, 0.67])
    # one model over both groups: all its training bytes cross between them (the meter says 0)
    assert (runs[runs.algorithm == "allreduce"].between_group_bytes_per_update == P).all()
    pts = pts.set_index("label")
    assert list(pts.index) == ["all-reduce", "MA-DNN H=16", "codistill k=25"]   # by bytes, most first
    cd = pts.loc["codistill k=25"]
    half = 2.919986 * 0.01 / math.sqrt(3)             # t(0.95, 2) x sd / sqrt(n), sd = 0.01
    assert cd.quality_mean == pytest.approx(0.73) and cd.quality_low == pytest.approx(0.73 - half, rel=1e-5)
    assert cd.bytes_vs_allreduce == pytest.approx(S / 25 / P)
    # codistill k=25 beats MA-DNN with fewer bytes; all-reduce is behind codistill with more bytes
    assert dict(pts.pareto) == {"all-reduce": False, "MA-DNN H=16": False, "codistill k=25": True}
    # projected: all-reduce at 2 ranks is the flat ring, 2 alpha + P / beta per update on top of compute
    for g in (1, 10, 100):
        want = sum(STEPS * ((20.0 + s) / STEPS + 2 * NET["alpha_s"] + P * 8 / (g * 1e9)) for s in range(3)) / 3
        assert pts.loc["all-reduce", f"projected_run_s_{g}Gbps"] == pytest.approx(want)
    assert (pts.projected_run_s_1Gbps > pts.projected_run_s_100Gbps).all()
    md = out[".md"].read_text()
    assert "| codistill k=25 *" in md and "| MA-DNN H=16 " in md and "Left out: PowerSGD: budget." in md


def test_table_builder_refuses_a_multi_model_run_with_bytes_inside_a_group(frontier_runs):
    manifest = json.loads(frontier_runs.read_text())
    path = Path(manifest["runs"][3]["run_dir"]) / "summary.json"   # codistill seed 0
    s = json.loads(path.read_text())
    s["comm"]["training_sent_bytes_per_rank_per_update"] += 1000.0
    path.write_text(json.dumps(s))
    with pytest.raises(ValueError, match="2 models on 2 ranks"):
        frontier_table.run_rows(manifest)


# ---------------------------------------------------------------- the plan

def test_plan_points_share_the_papers_runs_and_fit_the_layout():
    spec, points = load_points(SPEC, ROOT / "replications", "embedded")
    assert {"image", "lm"} <= set(spec.workloads)
    for w in spec.workloads:
        mine = [p for p in points if p.workload == w]
        labels = {p.label for p in mine}
        assert len(labels) >= 3 and "all-reduce" in labels
        assert all(sum(p.label == lab for p in mine) >= 3 for lab in labels)   # >= 3 seeds per point
        assert all(p.config.parallel.world_size == 2 for p in mine)
    plan = load_plan(ROOT / "replications", "embedded")
    paper_runs = set(plan.configs)
    shared = add_to_plan(plan, points)
    # Sun's MA-DNN (H = 16) is the paper's own runs; Anil's codistillation (k = 25) no longer is:
    # its pre-registered final seeds are 3-5 (f7693c3), the frontier's 0-2
    for w, label, where in (("image", "MA-DNN H=16", "sun2016 cifar10"),):
        ids = {p.run_id for p in points if p.workload == w and p.label == label}
        assert ids <= paper_runs and all(where in shared[i] for i in ids)
        # named from the checkout's root: the committed image.csv held this machine's absolute path
        assert all(shared[i].startswith("replications/sun2016/experiments.yaml: ") for i in ids)
    assert set(plan.configs) == paper_runs | {p.run_id for p in points}
    # DiLoCo's result: G mid-round; model 0 (the outer model the workers hold) when the run ends a round
    diloco = {(p.period, p.config.train.steps % p.period == 0, p.model) for p in points if p.algorithm == "diloco"}
    assert diloco and all(model == ("0" if at_end else "G") for _, at_end, model in diloco)
    assert {at_end for _, at_end, _ in diloco} == {True, False}


def test_a_point_naming_an_unknown_series_fails(tmp_path):
    text = SPEC.read_text().replace('{series: "MA-DNN, K=2"}', '{series: "MA-DNN, K=3"}', 1)
    (tmp_path / "frontier.yaml").write_text(text)
    with pytest.raises(FrontierError, match=r"series 'MA-DNN, K=3' is not in sun2016 cifar10"):
        load_points(tmp_path / "frontier.yaml", ROOT / "replications", "embedded")


# ---------------------------------------------------------------- the workflow

def test_dry_run_of_the_frontier_target_builds_its_jobs(tmp_path):
    """The README's command, through the repository's own Snakefile (which must include frontier.smk)."""
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-n", "-s", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path / "work"), "results/embedded/frontier/frontier.md"],
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.split("Job stats:", 1)[-1], re.M)}
    spec, points = load_points(SPEC, ROOT / "replications", "embedded")
    n = len(spec.workloads)
    assert counts["train"] == counts["run_config"] == len({p.run_id for p in points}), counts
    assert counts["frontier_runs"] == counts["frontier_table"] == counts["frontier_plot"] == n, counts
    assert counts["frontier"] == 1, counts
    for w in spec.workloads:
        assert f"results/embedded/frontier/{w}.png" in out and f"results/embedded/frontier/{w}_points.csv" in out
