"""A figure's runs -> one row per run (CSV + Markdown) and the long table of curves (CSV).

Input is a `{figure}_runs.json` written by the workflow: the figure's title and source and,
for every (series, seed), the run id and run directory. Nothing is searched for: the runs
listed there are read, and a missing file is an error. Every number comes from the run's
summary.json and metrics.jsonl (the headline model's rows: the first model in
summary.json, the one its final/best metric describe); a run whose metrics.jsonl is not the
one its summary records (`read_run`) is refused.

    python analysis/aggregate.py --runs R_runs.json --table R.csv --markdown R.md --curves R_curves.csv
    python analysis/aggregate.py --runs R_runs.json --from-table R.csv --markdown R.md   (redraw the .md
        from the committed per-run table, without the runs: make figures)

The "Mean over seeds" table applies the claims' censoring rule (analysis/claims.py, speedup) to
step_to_target: a seed that never reached the target is never averaged in; `reached` says "k of n",
and with a censored seed the mean is only bounded: "> m", m the mean over seeds of the step each
reached at, or its whole run for a seed that never did (it would have needed more).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

from codist.runlog import atomic_write_text, metrics_record

# Per-run columns, in order; units are in the names (_s seconds, _bytes bytes).
TABLE_COLUMNS = [
    "series", "seed", "run_id", "world_size", "models", "steps", "samples", "metric",
    "final_metric", "best_metric", "best_step", "target", "step_to_target", "wall_s_to_target",
    "wall_s", "eval_s", "setup_s", "elapsed_s",
    "comm_sent_bytes_per_rank_per_update", "between_group_sent_bytes_per_rank_per_update",
]


def read_json(path: str | os.PathLike) -> dict:
    with open(path) as f:
        return json.load(f)


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """Every row of a metrics.jsonl (one per evaluation per model); a line that is not JSON (a run
    cut while writing) is a ValueError naming the file and line."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not a JSON metrics row ({e.msg}; a run cut while "
                                     f"writing?); rerun that run") from None
    return rows


def read_run(run_dir: str | os.PathLike, run_id: str) -> tuple[dict, list[dict]]:
    """(summary, metrics rows) of a finished run, checked: summary.json is run `run_id`, and its
    record of metrics.jsonl (rows, last step, SHA-256, written by the run as it finished) matches
    the file, so metrics a run did not finish with (an orphaned run's later rows, a copy from
    another run) never reach a table or a figure. A mismatch is one line naming the file."""
    run_dir = Path(run_dir)
    summary = read_json(run_dir / "summary.json")
    if summary["run_id"] != run_id:
        raise ValueError(f"{run_dir}/summary.json is run {summary['run_id']}, expected {run_id}")
    path = run_dir / "metrics.jsonl"
    recorded = summary.get("metrics")
    if recorded is None:
        raise ValueError(f"{run_dir}/summary.json records no metrics (rows, last step, digest): written by "
                         f"codist before the record; rerun that run")
    rows = read_metrics(path)
    found = metrics_record(path.read_bytes())
    if found != recorded:
        what = ", ".join(f"{k} {found[k]} (summary: {recorded.get(k)})" for k in found if found[k] != recorded.get(k))
        raise ValueError(f"{path}: not the metrics its run finished with: {what}; rerun that run")
    return summary, rows


def headline_model(summary: dict) -> str:
    """The model whose metric summary.json reports (train.py: the first one logged)."""
    return next(iter(summary["models"]))


def reached(rows: list[dict], summary: dict) -> dict | None:
    """The first evaluation row at or past the workload's target (None: never, or no target)."""
    target, metric = summary.get("target"), summary["metric"]
    if target is None:
        return None
    better = (lambda v: v >= target) if summary["higher_is_better"] else (lambda v: v <= target)
    return next((r for r in rows if better(r[metric])), None)


def run_row(entry: dict, summary: dict, rows: list[dict]) -> dict:
    """One table row: a run's identity, its headline numbers and its communication."""
    head = headline_model(summary)
    mine = [r for r in rows if str(r["model"]) == head]
    best = summary["models"][head]["best"]
    hit = reached(mine, summary)
    comm = summary["comm"]
    return {
        "series": entry["series"], "seed": entry["seed"], "run_id": summary["run_id"],
        "world_size": summary["world_size"], "models": len(summary["models"]),
        "steps": summary["steps"], "samples": summary["samples"], "metric": summary["metric"],
        "final_metric": summary["final_metric"], "best_metric": summary["best_metric"],
        "best_step": best["step"], "target": summary.get("target"),
        "step_to_target": hit["step"] if hit else None, "wall_s_to_target": hit["wall_s"] if hit else None,
        "wall_s": summary["wall_s"], "eval_s": summary["eval_s"], "setup_s": summary["setup_s"],
        "elapsed_s": summary["elapsed_s"],
        "comm_sent_bytes_per_rank_per_update": comm["training_sent_bytes_per_rank_per_update"],
        "between_group_sent_bytes_per_rank_per_update": comm["between_group_sent_bytes_per_rank_per_update"],
    }


def aggregate(manifest: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run table, long curves table) for the runs `manifest` lists, in its order."""
    table, curves = [], []
    for entry in manifest["runs"]:
        summary, rows = read_run(entry["run_dir"], entry["run_id"])
        if not rows:
            raise ValueError(f"{entry['run_dir']}/metrics.jsonl has no rows")
        table.append(run_row(entry, summary, rows))
        head = headline_model(summary)
        for r in rows:
            curves.append({"series": entry["series"], "seed": entry["seed"], "run_id": entry["run_id"],
                           "headline": str(r["model"]) == head, "metric": summary["metric"], **r})
    table = pd.DataFrame(table, columns=TABLE_COLUMNS)
    maybe_missing = ["target", "step_to_target", "wall_s_to_target"]   # None when never reached
    table[maybe_missing] = table[maybe_missing].apply(pd.to_numeric)
    return table, pd.DataFrame(curves)


def steps_to_target_text(runs: pd.DataFrame) -> tuple[str, str]:
    """("k of n", the mean step to target or its censored bound "> m") of one series' runs; ("", "")
    without a target."""
    if runs["target"].isna().all():
        return "", ""
    t, n = runs["step_to_target"], len(runs)
    k = int(t.notna().sum())
    if k == n:
        return f"{k} of {n}", f"{t.mean():.4g}"
    return f"{k} of {n}", f"> {t.fillna(runs['steps']).mean():.4g}"


def series_means(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Mean over seeds per series (and the seed count), in the figure's series order; step_to_target
    under the claims' censoring rule (module docstring), with `reached`: "k of n"."""
    g = table.groupby("series", sort=False)
    out = g[["final_metric", "best_metric", "wall_s"]].mean()
    out.insert(0, "seeds", g.size())
    out.insert(0, "world_size", g["world_size"].first())
    texts = {s: steps_to_target_text(runs) for s, runs in g}
    out["reached"] = [texts[s][0] for s in out.index]
    out["step_to_target"] = [texts[s][1] for s in out.index]
    return out.reindex([s for s in order if s in out.index]).reset_index()


def markdown(manifest: dict, table: pd.DataFrame) -> str:
    """The figure's tables as Markdown: means per series, then every run."""
    head = f"# {manifest['paper']} {manifest['figure']} ({manifest['scale']}): {manifest['title']}\n\n"
    if manifest.get("source"):
        head += f"Mirrors: {manifest['source']}.\n\n"
    if manifest.get("notes"):
        head += manifest["notes"] + "\n\n"
    metric = table["metric"].iloc[0]
    body = (f"## Mean over seeds (metric: {metric})\n\n"
            + series_means(table, manifest["series"]).to_markdown(index=False, floatfmt=".4g")
            + "\n\n## Runs\n\n" + table.to_markdown(index=False, floatfmt=".4g") + "\n")
    return head + body


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="{figure}_runs.json written by the workflow")
    p.add_argument("--table", help="output: one row per run (CSV)")
    p.add_argument("--markdown", required=True, help="output: the tables as Markdown")
    p.add_argument("--curves", help="output: every metrics.jsonl row with series and seed (CSV)")
    p.add_argument("--from-table", help="input: a per-run table written before; only --markdown is redrawn from it")
    args = p.parse_args(argv)
    manifest = read_json(args.runs)
    if args.from_table:
        table = pd.read_csv(args.from_table)
        atomic_write_text(args.markdown, markdown(manifest, table))
        print(f"{manifest['paper']} {manifest['figure']}: {args.markdown} redrawn from {args.from_table}")
        return 0
    if not (args.table and args.curves):
        p.error("--table and --curves are required without --from-table")
    table, curves = aggregate(manifest)
    atomic_write_text(args.table, table.to_csv(index=False))
    atomic_write_text(args.curves, curves.to_csv(index=False))
    atomic_write_text(args.markdown, markdown(manifest, table))
    print(f"{manifest['paper']} {manifest['figure']}: {len(table)} runs, {len(curves)} curve rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
