"""The full-scale rehearsal's shrink rules (workflows/rehearsal.py): on the real full plan, every
run's rehearsal differs from it only in the allowed keys, in the allowed direction, with every
event still reached; anything else fails the plan, naming the key."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from experiments import load_plan  # noqa: E402
from rehearsal import (ALLOWED, CI_SUBSET, TIER, RehearsalError, check, ledger, rehearse,  # noqa: E402
                       scheduled_exchanges, shrink)
from workflow_config import check as check_workflow_config  # noqa: E402

from codist.algorithms import registry  # noqa: E402
from codist.config import validate, to_dict  # noqa: E402


@pytest.fixture(scope="module")
def full():
    plan = load_plan(ROOT / "replications", "full", "/data", TIER)
    rehearsal, shrinks = rehearse(plan)
    return plan, rehearsal, shrinks


def with_change(cfg, key, value):
    d = to_dict(cfg)
    node = d
    *path, last = key.split(".")
    for p in path:
        node = node[p]
    node[last] = value
    return validate(d)


def test_every_planned_run_is_rehearsed_within_the_allowed_shrinks(full):
    plan, rehearsal, shrinks = full
    assert set(rehearsal.configs) == set(plan.configs) and len(plan.configs) >= 159
    assert rehearsal.figures == plan.figures   # same run ids in the same figures
    for rid, cfg in plan.configs.items():
        used = rehearsal.configs[rid]
        assert {s.category for s in shrinks[rid]} <= set(ALLOWED)
        # what is not a shrink is the full run's: model, optimizer, precision, algorithm, data
        for section in ("workload", "optimizer"):
            assert getattr(used, section) == getattr(cfg, section), rid
        assert used.train.precision == cfg.train.precision and used.parallel.models == cfg.parallel.models
        assert used.schedule.name == cfg.schedule.name and used.schedule.gamma == cfg.schedule.gamma
        per, per_used = cfg.parallel.world_size // cfg.parallel.models, used.parallel.world_size // used.parallel.models
        assert per_used == min(per, 2), rid
        assert used.train.steps <= cfg.train.steps and used.train.batch_per_rank <= cfg.train.batch_per_rank
        # every event of the full run happens in the rehearsal, and the last update is evaluated
        assert all(0 < m <= used.train.steps for m in used.schedule.milestones)
        assert len(used.schedule.milestones) == len(cfg.schedule.milestones)
        assert all(k < used.train.steps for k in used.schedule.weight_decay_changes)
        assert used.train.eval_every == used.train.steps
        if cfg.train.checkpoint_every:   # one checkpoint of the full state, before the last update
            assert used.train.checkpoint_every < used.train.steps
        if registry.exchange_period(cfg.algorithm):
            assert scheduled_exchanges(used, used.train.steps) >= 1, rid
        if cfg.algorithm.name == "distill":   # the teacher is the planned run's, in the rehearsal plan
            assert cfg.algorithm.teacher_run in rehearsal.configs


def test_the_ci_subset_covers_every_workload_and_algorithm_family_with_its_teachers(full):
    """make test-slurm's rehearsal subset (tests/test_slurm_rehearsal.py): planned runs, at least
    one of each workload and each algorithm family of the full plan, and the runs they read."""
    plan, _, _ = full
    assert set(CI_SUBSET) <= set(plan.configs)
    chosen = [plan.configs[r] for r in CI_SUBSET]
    assert {c.workload.name for c in chosen} == {c.workload.name for c in plan.configs.values()}
    assert {c.algorithm.name for c in chosen} == {c.algorithm.name for c in plan.configs.values()}
    assert all(set(plan.upstream(r)) <= set(CI_SUBSET) for r in CI_SUBSET)


def test_shrinks_are_recorded_per_run(full):
    plan, _, shrinks = full
    rid = next(r for r, c in plan.configs.items() if c.algorithm.name == "codistill" and c.workload.name == "lm")
    got = {s.key: (s.planned, s.used) for s in shrinks[rid]}
    cfg = plan.configs[rid]
    assert got["algorithm.exchange_every"] == (cfg.algorithm.exchange_every, 2)
    assert got["algorithm.burn_in"] == (cfg.algorithm.burn_in, 1)   # the only phase change: first
    assert got["parallel.world_size"] == (cfg.parallel.world_size, 4)   # 2 models x 2 ranks
    assert got["launch.device"] == ("cuda", "cpu")
    assert {s.category for s in shrinks[rid] if s.key == "algorithm.exchange_every"} == {"periods"}
    # milestones keep their order and the weight-decay cuts stay with them (Sodhani's ImageNet)
    rid = next(r for r, c in plan.configs.items() if c.schedule.weight_decay_changes)
    cfg, used = plan.configs[rid], shrink(plan.configs[rid])
    for planned, moved in zip(cfg.schedule.weight_decay_changes, used.schedule.weight_decay_changes):
        if planned in cfg.schedule.milestones:
            assert moved == used.schedule.milestones[cfg.schedule.milestones.index(planned)]
    assert list(used.schedule.weight_decay_changes.values()) == list(cfg.schedule.weight_decay_changes.values())
    # ImageNet's one evaluation reads 100 of the validation images (the whole split: 72-80% of a job); the others all
    for rid, cfg in plan.configs.items():
        got = {s.key: (s.planned, s.used, s.category) for s in shrinks[rid]}
        if cfg.workload.name == "imagenet":
            assert got["train.eval_size"] == (0, 100, "evaluation"), rid
        else:
            assert "train.eval_size" not in got, rid


@pytest.mark.parametrize("planned,used,ok", [(0, 100, True), (500, 100, True), (500, 500, True),
                                             (0, 0, True), (100, 0, False), (100, 500, False)])
def test_an_evaluation_slice_is_of_the_planned_set_and_never_the_whole_of_a_planned_slice(full, planned, used, ok):
    plan, _, _ = full
    rid = next(r for r, c in plan.configs.items() if c.workload.name == "imagenet")
    cfg = with_change(plan.configs[rid], "train.eval_size", planned)
    rehearsed = with_change(shrink(cfg), "train.eval_size", used)
    if ok:
        assert [s.category for s in check(cfg, rehearsed) if s.key == "train.eval_size"] == (
            ["evaluation"] if planned != used else [])
    else:
        with pytest.raises(RehearsalError, match=r"train\.eval_size: .* a slice of the planned set"):
            check(cfg, rehearsed)


@pytest.mark.parametrize("key,value,says", [
    ("optimizer.lr", 0.5, "optimizer.lr"),
    ("train.precision", "bf16", "train.precision"),
    ("algorithm.alpha", 0.5, "algorithm.alpha"),
    ("train.batch_per_rank", 4096, "only shrinks"),
    ("parallel.world_size", 2, "ranks per model group"),   # 1 rank per group where the full run has many
])
def test_a_shrink_not_allowed_fails_the_plan(full, key, value, says):
    plan, rehearsal, _ = full
    rid = next(r for r, c in plan.configs.items() if c.algorithm.name == "codistill" and c.workload.name == "ctr")
    bad = with_change(rehearsal.configs[rid], key, value)
    with pytest.raises(RehearsalError, match=says.replace(".", r"\.")):
        check(plan.configs[rid], bad)


def test_the_workflow_accepts_rehearsal_and_its_config_key():
    assert check_workflow_config({"scale": "full", "rehearsal": True}).rehearsal is True
    assert check_workflow_config({}).rehearsal is False


def test_a_run_rehearsed_under_another_rehearsal_config_is_stale_not_ok(full, tmp_path):
    plan, rehearsal, shrinks = full
    rid = next(iter(plan.configs))
    run = tmp_path / "full" / "runs" / rid
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"run_id": "0123456789ab"}))
    row = next(r for r in ledger(plan, rehearsal, shrinks, tmp_path) if r["run_id"] == rid)
    assert row["status"] == "stale" and rehearsal.configs[rid].run_id() in row["first_error"], row


@pytest.mark.parametrize("record", ["none", "other rows", "its rows"])
def test_a_run_whose_metrics_the_figures_cannot_read_is_stale_not_ok(full, tmp_path, record):
    """A summary.json without the metrics record (written before it existed), or whose record does not
    match metrics.jsonl, is what analysis/aggregate.py refuses: the ledger must not call it ok; with
    its own rows' record the same summary is ok."""
    from codist.runlog import metrics_record
    plan, rehearsal, shrinks = full
    rid = next(iter(plan.configs))
    run = tmp_path / "full" / "runs" / rid
    run.mkdir(parents=True)
    rows = b'{"step": 2, "model": "0", "val_loss": 1.0}\n'
    (run / "metrics.jsonl").write_bytes(rows)
    summary = {"run_id": rehearsal.configs[rid].run_id(), "steps": 2, "wall_s": 1.0,
               "comm": {"by_category": {}, "training_sent_bytes_per_rank_per_update": 0}}
    if record == "other rows":
        summary["metrics"] = metrics_record(rows + b'{"step": 4, "model": "0", "val_loss": 0.5}\n')
    if record == "its rows":
        summary["metrics"] = metrics_record(rows)
    (run / "summary.json").write_text(json.dumps(summary))
    row = next(r for r in ledger(plan, rehearsal, shrinks, tmp_path) if r["run_id"] == rid)
    if record == "its rows":
        assert row["status"] == "ok" and row["updates_done"] == 2, row
    else:
        assert row["status"] == "stale" and "metrics record" in row["first_error"], row


@pytest.mark.parametrize("reference", [False, True])
def test_the_ledger_keeps_the_rows_of_runs_that_left_nothing_here(full, tmp_path, capsys, reference):
    """`rehearsal.py ledger` (which `run` ends with) over a results root holding one run: the runs
    whose directories are gone keep the row the ledger already holds when it was rehearsed with the
    plan's shrinks (and its commit and date), a row of other shrinks is stale, and the run present is
    read again, with the commit and start of its manifest; the line printed says how many rows were
    measured now and how many carried. Without --reference the committed runs.csv stays as it was
    and the ledger goes to the git-ignored runs.local.csv."""
    import csv
    from rehearsal import COLUMNS, main
    plan, rehearsal, shrinks = full
    kept, other, here = list(plan.configs)[:3]
    committed = tmp_path / "rehearsal" / "full" / "runs.csv"
    committed.parent.mkdir(parents=True)
    with committed.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for rid, shrunk in ((kept, shrinks[kept]), (other, shrinks[other][1:]), (here, shrinks[here])):
            w.writerow({"run_id": rid, "status": "ok", "job_s": "41", "commit": "abc", "date": "then",
                        "shrinks": "; ".join(map(str, shrunk))})
    before = committed.read_bytes()
    run = tmp_path / "rehearsal" / "full" / "runs" / here
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"run_id": "0123456789ab"}))
    (run / "manifest.json").write_text(json.dumps({"git": {"commit": "0123456789abcdef", "dirty": True},
                                                   "started_unix": 86400.0}))
    argv = ["ledger", "--results", str(tmp_path), "--data-root", "/data"] + (["--reference"] if reference else [])
    assert main(argv) == 0
    out = committed if reference else committed.with_name("runs.local.csv")
    if not reference:
        assert committed.read_bytes() == before
    rows = {r["run_id"]: r for r in csv.DictReader(out.open())}
    assert len(rows) == len(plan.configs)
    assert rows[kept]["status"] == "ok" and rows[kept]["job_s"] == "41"
    assert (rows[kept]["commit"], rows[kept]["date"]) == ("abc", "then")
    assert rows[other]["status"] == "stale" and "other shrinks" in rows[other]["first_error"]
    assert rows[here]["status"] == "stale" and rows[here]["job_s"] == ""
    assert (rows[here]["commit"], rows[here]["date"]) == ("0123456789ab+dirty", "1970-01-02T00:00:00+00:00")
    assert {r["status"] for rid, r in rows.items() if rid not in (kept, other, here)} == {"not run (time)"}
    printed = capsys.readouterr().out
    assert f"1 measured now" in printed and f"2 carried from {committed}" in printed, printed
    assert f"{len(plan.configs) - 3} never run" in printed, printed


def test_a_ledger_from_before_the_commit_column_says_which_commit_recorded_each_row(tmp_path):
    """A committed ledger without commit and date: each row reads 'unknown: recorded in' the last
    commit that changed its measured values (a column added later is no new measurement), 'by' that
    commit's date; a row never run stays without."""
    import subprocess
    from rehearsal import read_ledger

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    ledger_csv = tmp_path / "runs.csv"
    versions = ["run_id,status,job_s,shrinks\na,ok,40,s\nb,ok,50,s\nc,not run (time),,s\n",
                "run_id,status,job_s,setup_s,shrinks\na,ok,40,2.5,s\nb,ok,51,2.5,s\nc,not run (time),,,s\n",
                "run_id,status,job_s,setup_s,shrinks\na,ok,40,2.5,s\nb,ok,51,2.5,s\nc,not run (time),,,s\nd,ok,9,1,s\n"]
    commits = []
    for i, text in enumerate(versions):
        ledger_csv.write_text(text)
        git("add", "runs.csv")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"v{i}",
            "--date", f"2026-01-0{i + 1}T00:00:00+00:00")
        commits.append(git("log", "-1", "--format=%h %cI").split())
    rows = read_ledger(ledger_csv)
    assert rows["a"]["commit"] == f"unknown: recorded in {commits[0][0]}" and rows["a"]["date"] == f"by {commits[0][1]}"
    assert rows["b"]["commit"] == f"unknown: recorded in {commits[1][0]}"
    assert rows["d"]["commit"] == f"unknown: recorded in {commits[2][0]}"
    assert not rows["c"].get("commit")


def test_ledger_sizes_count_a_tied_tensor_once_and_leave_buffers_out(tmp_path):
    import torch
    from rehearsal import model_size
    emb = torch.zeros(10, 4)
    torch.save({"decoder.embed_tokens.weight": emb, "decoder.output_projection.weight": emb,
                "fc.weight": torch.zeros(3, 4), "bn.running_mean": torch.zeros(3), "bn.num_batches_tracked":
                torch.tensor(0), "decoder.version": torch.ones(1)}, tmp_path / "model_0.pt")
    assert model_size(tmp_path / "model_0.pt") == (40 + 12, 40 + 12 + 3 + 1, 3)


def test_closed_form_bytes_per_rank_per_update(full):
    from rehearsal import closed_form
    plan, rehearsal, _ = full
    pick = {a: next(r for r, c in plan.configs.items() if c.algorithm.name == a)
            for a in ("allreduce", "model_average", "codistill")}
    ar = plan.configs[pick["allreduce"]]
    p = ar.parallel.world_size
    assert closed_form(ar, 1000, 1000, 10) == pytest.approx(2 * (p - 1) / p * 4000)
    ma = rehearsal.configs[pick["model_average"]]   # K models of 1 rank: rounds after updates tau, 2 tau, ...
    k, tau, steps = ma.parallel.models, ma.algorithm.tau, ma.train.steps
    assert ma.parallel.world_size == k
    assert closed_form(ma, 1000, 1100, steps) == pytest.approx(2 * (k - 1) / k * 4400 * (steps // tau) / steps)
    cd = rehearsal.configs[pick["codistill"]]   # exchanges before update burn_in, burn_in + k, ...
    n = cd.parallel.models
    ex = len(range(cd.algorithm.burn_in, cd.train.steps, cd.algorithm.exchange_every))
    assert scheduled_exchanges(cd, cd.train.steps) == ex >= 1
    per = cd.parallel.world_size // n
    assert closed_form(cd, 1000, 1000, cd.train.steps) == pytest.approx(
        2 * (per - 1) / per * 4000 + (n - 1) * 4000 * ex / cd.train.steps)
    # a group of several ranks averages its BatchNorm statistics before each exchange
    assert closed_form(cd, 1000, 1000, cd.train.steps, norm=10) - closed_form(cd, 1000, 1000, cd.train.steps) \
        == pytest.approx(2 * (per - 1) / per * 40 * ex / cd.train.steps)


def test_a_rehearsal_figure_says_so_on_itself(full, tmp_path):
    """A rehearsal plan's figure manifests carry the stamp, and analysis/figure_data.finish writes it
    across the figure: the text is on the canvas, and the PNG has its red pixels (none without)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image
    sys.path.insert(0, str(ROOT / "analysis"))
    from figure_data import finish

    plan, rehearsal, _ = full
    assert "stamp" not in plan.figure_manifest("sun2016", "communication", "R")
    manifest = rehearsal.figure_manifest("sun2016", "communication", "R")
    assert manifest["stamp"] == "rehearsal: not a result"

    def draw(path, manifest):
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([0, 1], [0, 1], color="black")
        finish(fig, manifest, path, notes=())
        return fig, np.asarray(Image.open(path).convert("RGB")).astype(int)

    plain, plain_px = draw(tmp_path / "plain.png", {**manifest, "stamp": None})
    stamped, stamped_px = draw(tmp_path / "stamped.png", manifest)
    assert "rehearsal: not a result" not in [t.get_text() for t in plain.texts]
    assert "rehearsal: not a result" in [t.get_text() for t in stamped.texts]
    reddish = lambda px: int(((px[..., 0] - px[..., 2]) > 60).sum())   # noqa: E731
    assert reddish(plain_px) == 0 and reddish(stamped_px) > 500


def test_a_rehearsal_figure_manifest_names_the_ids_its_summaries_hold_and_waits_for_every_run(full, tmp_path):
    """The analysis checks each summary's run id against the figure's manifest: a rehearsal's
    summary holds its shrunk config's id, in the planned id's directory. A figure is drawn only
    once all its runs are rehearsed (rehearsal.figure_status)."""
    from rehearsal import figure_status
    plan, rehearsal, _ = full
    key = ("sun2016", "communication")
    runs = rehearsal.figure_manifest(*key, "R")["runs"]
    for run in runs:
        assert run["run_dir"] == f"R/full/runs/{run['planned_run_id']}"
        assert run["run_id"] == rehearsal.configs[run["planned_run_id"]].run_id() != run["planned_run_id"]
    ids = [r["planned_run_id"] for r in runs]
    for rid in ids[:-1]:
        (tmp_path / "full" / "runs" / rid).mkdir(parents=True)
        (tmp_path / "full" / "runs" / rid / "summary.json").write_text("{}")
    ready, waiting = figure_status(plan, tmp_path)
    assert key not in ready and waiting[key] == (len(set(ids)) - 1, len(set(ids)))
    (tmp_path / "full" / "runs" / ids[-1]).mkdir(parents=True)
    (tmp_path / "full" / "runs" / ids[-1] / "summary.json").write_text("{}")
    assert key in figure_status(plan, tmp_path)[0]


def test_a_figure_drawn_from_the_same_runs_stays_drawn_when_their_directories_are_gone(full, tmp_path):
    """FIGURES.md after a figures run over a results root without runs (a wiped scratch): a figure
    whose manifest names the plan's rehearsal runs stays drawn; one drawn from other rehearsal runs,
    or without its PNG, waits for its runs."""
    from rehearsal import draw_figures
    plan, rehearsal, _ = full
    same, other, no_png = ("sun2016", "communication"), ("anil2018", "fig4"), ("anil2018", "fig1")
    results = tmp_path / "rehearsal" / "full"
    for key in (same, other, no_png):
        runs = rehearsal.figure_manifest(*key, str(tmp_path / "rehearsal"))["runs"]
        if key == other:
            runs[0]["run_id"] = "0123456789ab"
        (results / key[0]).mkdir(parents=True, exist_ok=True)
        (results / key[0] / f"{key[1]}_runs.json").write_text(json.dumps({"runs": runs}))
        if key != no_png:
            (results / key[0] / f"{key[1]}.png").write_bytes(b"png")
    assert draw_figures(plan, rehearsal, str(tmp_path), "/data", 1) == 0
    note = (results / "FIGURES.md").read_text()
    drawn, waiting = note.split("## Not drawn")[0], note.split("## Not drawn")[1]
    assert "`sun2016/communication.png`" in drawn
    assert "`anil2018/fig4`" in waiting and "`anil2018/fig1`" in waiting
    assert "fig4" not in drawn and "fig1" not in drawn


def test_translation_rows_count_the_planned_dictionaries_not_the_miniature_ones(full, tmp_path):
    """A translation row (carried, as every row is once its run directory is gone) gets the planned
    Transformer's parameters and planned bytes: the model built with the throughput table's
    dictionaries of its language pair, the same count benchmarks/comm_volume.py has from a real
    32,768-type fairseq folder, not the rehearsal model_0.pt's miniature one (issue 42: 18% low)."""
    import pandas as pd
    import yaml
    from rehearsal import RehearsalError, closed_form, planned_dictionaries, planned_size
    plan, rehearsal, shrinks = full
    wmt = next(rid for rid, c in plan.configs.items() if c.workload.name == "translation"
               and c.workload.source_lang == "en" and c.algorithm.name == "codistill")
    cfg = plan.configs[wmt]
    written = {wmt: {"run_id": wmt, "status": "ok", "parameters": "177651712", "shrinks": "; ".join(map(str, shrinks[wmt])),
                     "bytes_per_rank_per_update_closed_form_used": "1065910276", "commit": "c", "date": "d"}}
    row = next(r for r in ledger(plan, rehearsal, shrinks, tmp_path, written) if r["run_id"] == wmt)
    bench = pd.read_csv(ROOT / "results" / "bench" / "comm_volume.csv")
    assert row["parameters"] == bench[bench.model == "transformer_big"].model_params.iloc[0]
    assert row["model"].endswith("-dict32768")
    n, state, norm = planned_size(cfg, planned_dictionaries(cfg))
    assert row["bytes_per_rank_per_update_closed_form_planned"] == round(closed_form(cfg, n, state, cfg.train.steps))
    assert row["bytes_per_rank_per_update_closed_form_used"] == "1065910276"   # the rehearsal model's, measured
    doc = yaml.safe_load((ROOT / "replications" / "throughput.yaml").read_text())
    del doc["translation"]["en-de"]
    (tmp_path / "throughput.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RehearsalError, match=r"throughput.yaml: translation.en-de needs source_dict"):
        planned_dictionaries(cfg, tmp_path / "throughput.yaml")


def test_stamp_tables_marks_every_csv_and_markdown_once_and_readers_still_read_them(tmp_path):
    """A rehearsal figure's CSVs get a last column `stamp` (pandas readers see the same columns
    beside it), its Markdown files a line under the heading; a second pass changes nothing, and each
    file keeps its modification time (Snakemake sees no newer input)."""
    import os

    import pandas as pd
    from rehearsal import STAMP, stamp_tables
    d = tmp_path / "full" / "sun2016"
    d.mkdir(parents=True)
    (d / "cifar10.csv").write_text('series,seed,final_metric\n"MA-DNN, K=4",0,0.5\n')
    (d / "cifar10_values.csv").write_text("row,seed,value\nMA,0,0.25\n")
    (d / "cifar10.md").write_text("# sun2016 cifar10 (full): title\n\nMirrors: Fig. 1.\n")
    (d / "other.csv").write_text("a\n1\n")   # not a table of the figures named
    for f in d.iterdir():
        os.utime(f, (1_000_000, 1_000_000))
    before = {f.name: pd.read_csv(f) for f in d.glob("cifar10*.csv")}
    assert stamp_tables(tmp_path, [("sun2016", "cifar10")]) == 3
    for name, df in before.items():
        after = pd.read_csv(d / name)
        assert list(after.columns) == [*df.columns, "stamp"] and (after["stamp"] == STAMP).all()
        assert after.drop(columns="stamp").equals(df)
    md = (d / "cifar10.md").read_text().splitlines()
    assert md[0] == "# sun2016 cifar10 (full): title" and "Rehearsal: not a result" in md[2] and md[-1] == "Mirrors: Fig. 1."
    assert {f.name: f.stat().st_mtime for f in d.iterdir()} == dict.fromkeys(
        ["cifar10.csv", "cifar10_values.csv", "cifar10.md", "other.csv"], 1_000_000)
    assert (d / "other.csv").read_text() == "a\n1\n"
    text = {f.name: f.read_text() for f in d.iterdir()}
    assert stamp_tables(tmp_path, [("sun2016", "cifar10")]) == 0
    assert {f.name: f.read_text() for f in d.iterdir()} == text



def test_the_committed_rehearsal_tables_carry_the_stamp():
    """Every CSV and Markdown file beside a rehearsal figure says it is a rehearsal (issue 42: only
    the PNGs did)."""
    import pandas as pd
    from rehearsal import STAMP
    full = ROOT / "results" / "rehearsal" / "full"
    csvs, mds = sorted(full.glob("*/*.csv")), sorted(full.glob("*/*.md"))
    assert len(csvs) >= 70 and len(mds) >= 35
    assert [f for f in csvs if not (pd.read_csv(f).get("stamp", pd.Series([None])) == STAMP).all()] == []
    assert [f for f in mds if "Rehearsal: not a result" not in f.read_text()] == []
