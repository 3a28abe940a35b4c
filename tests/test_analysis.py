"""aggregate.py and plot_curves.py on fake run directories in the real file formats.

The fake runs are written the way codist.rank.train writes them (metrics.jsonl rows, summary.json
with final/best per model and the comm section), so the checks are that every number in
the tables is read from those files, not recomputed or invented.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import aggregate  # noqa: E402
import figure_data  # noqa: E402
import plot_curves  # noqa: E402
from codist.runlog import metrics_record  # noqa: E402

METRIC = "val_accuracy"
TARGET = 0.5


def fake_run(run_dir: Path, run_id: str, world: int, accs: list[float], models=("0",), every=10,
             batch=32, comm_per_update=1000.0) -> None:
    """A finished run: one eval row per `every` steps per model, summary.json consistent with it."""
    run_dir.mkdir(parents=True)
    rows, per_model = [], {}
    for m_i, m in enumerate(models):
        mine = []
        for i, acc in enumerate(accs):
            step = (i + 1) * every
            mine.append({"step": step, "samples": step * batch * world, "wall_s": round(0.1 * step * world, 4),
                         "model": m, "val_loss": 2.0 - acc, METRIC: acc - 0.01 * m_i,
                         "train_loss": 2.1 - acc, "comm_bytes": int(comm_per_update * step * world)})
        best = max(mine, key=lambda r: r[METRIC])
        per_model[m] = {"final": mine[-1], "best": {"step": best["step"], METRIC: best[METRIC]}}
        rows += mine
    rows.sort(key=lambda r: (r["step"], r["model"]))   # train.py logs all models at each eval
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    head = per_model[models[0]]
    steps = len(accs) * every
    summary = {
        "run_id": run_id, "name": run_id, "workload": "cifar", "algorithm": "allreduce", "metric": METRIC,
        "higher_is_better": True, "target": TARGET, "final_metric": head["final"][METRIC],
        "best_metric": head["best"][METRIC], "steps": steps, "samples": steps * batch * world,
        "world_size": world, "wall_s": head["final"]["wall_s"], "eval_s": 0.5, "setup_s": 20.0,
        "elapsed_s": 21.0 + head["final"]["wall_s"], "models": per_model,
        "comm": {"training_sent_bytes_all_ranks": comm_per_update * world * steps,
                 "training_sent_bytes_per_rank_per_update": comm_per_update,
                 "between_group_sent_bytes_per_rank_per_update": 0.0, "by_category": {}},
    }
    summary["metrics"] = metrics_record((run_dir / "metrics.jsonl").read_bytes())   # as train.finish records it
    (run_dir / "summary.json").write_text(json.dumps(summary))


@pytest.fixture
def figure(tmp_path) -> Path:
    """A figure of two series: 'one' with seeds 0 and 1, 'two' (two models) with seed 0."""
    runs = [("one", 0, "aaaaaaaaaaaa", 1, [0.2, 0.4, 0.6, 0.55], ("0",)),
            ("one", 1, "bbbbbbbbbbbb", 1, [0.3, 0.45, 0.5, 0.52], ("0",)),
            ("two", 0, "cccccccccccc", 2, [0.1, 0.3, 0.45, 0.49], ("0", "1"))]
    entries = []
    for series, seed, rid, world, accs, models in runs:
        fake_run(tmp_path / "runs" / rid, rid, world, accs, models)
        entries.append({"series": series, "seed": seed, "run_id": rid, "run_dir": str(tmp_path / "runs" / rid)})
    manifest = {"paper": "toy", "figure": "fig9", "scale": "embedded", "title": "a toy figure",
                "source": "Fig. 9", "kind": "curves", "notes": "fake runs", "series": ["two", "one"],
                "runs": entries}
    path = tmp_path / "fig9_runs.json"
    path.write_text(json.dumps(manifest))
    return path


def test_table_numbers_come_from_the_run_files(figure):
    manifest = json.loads(figure.read_text())
    table, curves = aggregate.aggregate(manifest)
    assert list(table["run_id"]) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"]
    for entry, row in zip(manifest["runs"], table.to_dict("records")):
        lines = [json.loads(x) for x in (Path(entry["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
        head = [r for r in lines if r["model"] == "0"]
        assert row["final_metric"] == head[-1][METRIC]
        assert row["best_metric"] == max(r[METRIC] for r in head)
        assert row["best_step"] == max(head, key=lambda r: r[METRIC])["step"]
        first_hit = next((r for r in head if r[METRIC] >= TARGET), None)
        if first_hit:
            assert row["step_to_target"] == first_hit["step"] and row["wall_s_to_target"] == first_hit["wall_s"]
        else:
            assert pd.isna(row["step_to_target"])
        assert row["steps"] == head[-1]["step"] and row["samples"] == head[-1]["samples"]
        assert row["series"] == entry["series"] and row["seed"] == entry["seed"]
    assert table.loc[2, "models"] == 2 and table.loc[2, "world_size"] == 2
    assert (table["comm_sent_bytes_per_rank_per_update"] == 1000.0).all()
    # every metrics row, tagged; only model 0 is the headline
    assert len(curves) == 4 + 4 + 8
    assert curves["headline"].sum() == 12
    assert set(curves.columns) >= {"series", "seed", "run_id", "model", "step", "wall_s", METRIC}


def test_series_means_and_markdown(figure):
    manifest = json.loads(figure.read_text())
    table, _ = aggregate.aggregate(manifest)
    means = aggregate.series_means(table, manifest["series"])
    assert list(means["series"]) == ["two", "one"]               # the figure's order
    one = means.set_index("series").loc["one"]
    assert one["seeds"] == 2 and one["final_metric"] == pytest.approx((0.55 + 0.52) / 2)
    md = aggregate.markdown(manifest, table)
    assert "toy fig9 (embedded): a toy figure" in md and "| one" in md and "cccccccccccc" in md


def test_summary_of_another_run_is_an_error(figure):
    manifest = json.loads(figure.read_text())
    manifest["runs"][0]["run_id"] = "dddddddddddd"
    with pytest.raises(ValueError, match="expected dddddddddddd"):
        aggregate.aggregate(manifest)


def test_cli_writes_tables_and_plot(figure, tmp_path):
    out = {k: tmp_path / "out" / f"fig9{s}" for k, s in
           (("table", ".csv"), ("markdown", ".md"), ("curves", "_curves.csv"), ("png", ".png"))}
    assert aggregate.main(["--runs", str(figure), "--table", str(out["table"]), "--markdown",
                           str(out["markdown"]), "--curves", str(out["curves"])]) == 0
    table = pd.read_csv(out["table"])
    assert table.loc[0, "final_metric"] == 0.55 and table.loc[0, "metric"] == METRIC
    assert plot_curves.main(["--runs", str(figure), "--table", str(out["table"]), "--curves",
                             str(out["curves"]), "--out", str(out["png"])]) == 0
    data = out["png"].read_bytes()
    assert len(data) > 10_000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_plotted_curves_are_means_over_seeds_of_the_headline_model(figure):
    manifest = json.loads(figure.read_text())
    _, curves = aggregate.aggregate(manifest)
    one = figure_data.mean_curve(curves, "one", "0", METRIC).set_index("step")
    assert one.loc[30, "mean"] == pytest.approx(0.55) and one.loc[30, "min"] == 0.5 and one.loc[30, "max"] == 0.6
    assert (one["seeds"] == 2).all()
    two = figure_data.mean_curve(curves, "two", "0", METRIC).set_index("step")
    assert list(two["mean"]) == [0.1, 0.3, 0.45, 0.49]           # model 1's rows are not averaged in


# ------------------------------------------------------------------ issues 41 and 42
def test_the_mean_table_reports_k_of_n_reached_under_the_claims_censoring():
    """Issue 41: a mean over the seeds that reached the target, beside a count of all seeds, read as if
    every seed had (sun2016/cifar100.md: 1920 for MA-DNN from 2 of 3 seeds). A seed that never reached
    it ran its whole run without: the mean is only bounded, > (100 + 400 + 200) / 3."""
    table = pd.DataFrame({"series": ["s"] * 3 + ["t"] * 2 + ["u"] * 2, "seed": [0, 1, 2, 0, 1, 0, 1],
                          "world_size": 1, "final_metric": 0.5, "best_metric": 0.6, "wall_s": 1.0,
                          "steps": 400, "target": [0.5] * 5 + [None] * 2,
                          "step_to_target": [100, None, 200, 100, 300, None, None]})
    means = aggregate.series_means(table, ["s", "t", "u"]).set_index("series")
    assert (means.loc["s", "reached"], means.loc["s", "step_to_target"]) == ("2 of 3", "> 233.3")
    assert (means.loc["t", "reached"], means.loc["t", "step_to_target"]) == ("2 of 2", "200")
    assert (means.loc["u", "reached"], means.loc["u", "step_to_target"]) == ("", "")   # no target
    manifest = {"paper": "toy", "figure": "f", "scale": "embedded", "title": "t", "series": ["s", "t", "u"]}
    md = aggregate.markdown(manifest, table.assign(metric="val_accuracy"))
    assert "2 of 3" in md and "> 233.3" in md


def test_step_to_target_is_the_headline_models():
    """Issue 42: the first evaluation at the target of model 0 (the headline), not of any model: here
    model 1 reaches it at step 10, model 0 only at step 30."""
    rows = [{"step": s, "model": m, "wall_s": s / 10, METRIC: v}
            for s, v0, v1 in ((10, 0.2, 0.55), (20, 0.4, 0.6), (30, 0.6, 0.7)) for m, v in (("0", v0), ("1", v1))]
    summary = {"run_id": "r", "models": {"0": {"best": {"step": 30}}, "1": {"best": {"step": 30}}},
               "target": TARGET, "metric": METRIC, "higher_is_better": True, "world_size": 2, "steps": 30,
               "samples": 1920, "final_metric": 0.6, "best_metric": 0.6, "wall_s": 3.0, "eval_s": 0.1,
               "setup_s": 1.0, "elapsed_s": 4.0, "comm": {"training_sent_bytes_per_rank_per_update": 0.0,
                                                          "between_group_sent_bytes_per_rank_per_update": 0.0}}
    row = aggregate.run_row({"series": "s", "seed": 0}, summary, rows)
    assert (row["step_to_target"], row["wall_s_to_target"]) == (30, 3.0)


def test_the_markdown_redrawn_from_the_table_is_the_one_the_runs_give(figure, tmp_path):
    out = {k: tmp_path / f"o.{k}" for k in ("csv", "md", "curves")}
    assert aggregate.main(["--runs", str(figure), "--table", str(out["csv"]), "--markdown", str(out["md"]),
                           "--curves", str(out["curves"])]) == 0
    redrawn = tmp_path / "redrawn.md"
    assert aggregate.main(["--runs", str(figure), "--from-table", str(out["csv"]), "--markdown", str(redrawn)]) == 0
    assert redrawn.read_text() == out["md"].read_text()


def test_a_cut_metrics_line_is_named_by_its_number(tmp_path):
    """The first line that is not JSON, counted from 1 with blank lines counted: line 4 here."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n\n{"step": 2}\n{"step": \n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:4: not a JSON metrics row"):
        aggregate.read_metrics(path)


def test_a_changed_metrics_file_names_only_what_differs(figure):
    """A value edited in place keeps the row count and last step: the message names the digest alone."""
    manifest = json.loads(figure.read_text())
    path = Path(manifest["runs"][0]["run_dir"]) / "metrics.jsonl"
    path.write_text(path.read_text().replace('"val_loss": 1.8', '"val_loss": 1.7', 1))
    with pytest.raises(ValueError, match="not the metrics its run finished with") as e:
        aggregate.aggregate(manifest)
    assert "sha256" in str(e.value) and "rows" not in str(e.value) and "last_step" not in str(e.value)


def test_a_lower_is_better_target_is_reached_when_equalled():
    rows = [{"step": s, "val_loss": v} for s, v in ((10, 2.0), (20, 1.5), (30, 1.2))]
    summary = {"target": 1.5, "metric": "val_loss", "higher_is_better": False}
    assert aggregate.reached(rows, summary)["step"] == 20


def test_the_tables_keep_the_figures_series_order_and_their_columns(figure, tmp_path):
    """Series in the figure's order (here not alphabetical), world_size then seeds first, no index
    column in the Markdown tables or the curves CSV."""
    manifest = json.loads(figure.read_text())
    for r in manifest["runs"]:
        r["series"] = {"one": "zeta", "two": "alpha"}[r["series"]]
    manifest["series"] = ["zeta", "alpha"]
    figure.write_text(json.dumps(manifest))
    table, _ = aggregate.aggregate(manifest)
    means = aggregate.series_means(table, manifest["series"])
    assert list(means.columns[:3]) == ["series", "world_size", "seeds"]
    assert list(means["series"]) == ["zeta", "alpha"]
    md = aggregate.markdown(manifest, table)
    for block in md.split("## ")[1:]:
        header = next(line for line in block.splitlines() if line.startswith("|"))
        assert header.split("|")[1].strip() in ("series", "world_size"), header
    out = {k: tmp_path / f"o.{k}" for k in ("csv", "md", "curves")}
    assert aggregate.main(["--runs", str(figure), "--table", str(out["csv"]), "--markdown", str(out["md"]),
                           "--curves", str(out["curves"])]) == 0
    assert pd.read_csv(out["curves"]).columns[0] == "series"


def test_the_cli_needs_its_inputs_and_outputs(figure, tmp_path, capsys):
    md = str(tmp_path / "o.md")
    for argv in (["--markdown", md], ["--runs", str(figure)],
                 ["--runs", str(figure), "--table", str(tmp_path / "o.csv"), "--curves", str(tmp_path / "c.csv")],
                 ["--runs", str(figure), "--markdown", md, "--table", str(tmp_path / "o.csv")],
                 ["--runs", str(figure), "--markdown", md, "--curves", str(tmp_path / "c.csv")]):
        with pytest.raises(SystemExit) as e:
            aggregate.main(argv)
        assert e.value.code == 2, argv
    assert not (tmp_path / "o.md").exists()


def test_a_figure_of_one_run_has_its_tables(figure):
    manifest = json.loads(figure.read_text())
    manifest["runs"] = manifest["runs"][:1]
    table, _ = aggregate.aggregate(manifest)
    assert f"(metric: {METRIC})" in aggregate.markdown(manifest, table)
