"""A `table` figure's numbers: for each row the spec lists (a series and one of its models), each
column's paper value beside ours (mean, standard deviation and count over seeds).

Columns are metrics of the runs' last evaluation (e.g. `val_log_loss`, `val_nll`), or:
  error_pct                       100 x (1 - val_accuracy)
  churn                           Anil et al.'s prediction churn: mean |p_a(click) - p_b(click)|
                                  on the validation set between two retrains (seeds) of the same
                                  configuration, one value per pair of seeds; for the ensemble
                                  model p is the mean of its members' probabilities (each run
                                  wrote its models' p(click) per sample: val_predictions_<m>.npy)
  comm_bytes_per_update           bytes each rank sent per update for training (summary.json)
  between_group_bytes_per_update  of which between model groups

Writes `{figure}_values.csv` (one row per row x column x seed or seed pair: what the claims
and the plot read) and `{figure}_paper.csv` / `.md` (paper vs ours, side by side).

    python analysis/paper_table.py --runs R_runs.json --table R.csv --curves R_curves.csv \
        --values R_values.csv --paper R_paper.csv --markdown R_paper.md
    python analysis/paper_table.py --from-values --runs R_runs.json --values R_values.csv \
        --paper R_paper.csv --markdown R_paper.md      # from a _values.csv written before
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from codist.runlog import atomic_write_text
from analysis.figure_data import finals, label

SUMMARY_COLUMNS = {"comm_bytes_per_update": "comm_sent_bytes_per_rank_per_update",
                   "between_group_bytes_per_update": "between_group_sent_bytes_per_rank_per_update"}


def churn_values(manifest: dict, series: str, model: str) -> list[tuple[str, float]]:
    """(pair "s1-s2", churn) for every pair of seeds of `series`, from the validation predictions
    each run wrote (`val_predictions_<model>.npy`, p(click) per sample): no model is rebuilt here."""
    runs = sorted((r for r in manifest["runs"] if r["series"] == series), key=lambda r: r["seed"])
    if len(runs) < 2:
        raise ValueError(f"churn of {series!r} needs at least 2 retrains (seeds), has {len(runs)}")
    probs = {}
    for r in runs:
        run_dir = Path(r["run_dir"])
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        if cfg["workload"]["name"] != "ctr":
            raise ValueError(f"{run_dir}: churn is defined for the ctr workload, not {cfg['workload']['name']!r}")
        names = [model] if model != "ensemble" else [str(i) for i in range(cfg["parallel"]["models"])]
        paths = [run_dir / f"val_predictions_{n}.npy" for n in names]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"churn needs the runs' validation predictions (written by runs since "
                                    f"issue 15; rerun older runs); missing {missing}")
        members = [np.load(p) for p in paths]
        probs[r["seed"]] = sum(members) / len(members)
    return [(f"{a}-{b}", float(np.abs(probs[a] - probs[b]).mean()))
            for a, b in itertools.combinations(sorted(probs), 2)]


def values(manifest: dict, table: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Long table: row label, series, model, column, seed (or seed pair), value."""
    out = []
    for row in manifest["rows"]:
        series, model = row["series"], str(row.get("model", "0"))
        for col in manifest["columns"]:
            if col == "churn":
                pairs = churn_values(manifest, series, model)
            elif col in SUMMARY_COLUMNS:
                runs = table[table["series"] == series]
                pairs = [(str(s), float(v)) for s, v in zip(runs["seed"], runs[SUMMARY_COLUMNS[col]])]
            else:
                pairs = [(str(s), float(v)) for s, v in finals(curves, series, model, col).items()]
            out += [{"row": row["label"], "series": series, "model": model, "column": col, "seed": s, "value": v}
                    for s, v in pairs]
    return pd.DataFrame(out)


def side_by_side(manifest: dict, vals: pd.DataFrame) -> pd.DataFrame:
    """One line per row: for each column the paper's value, our mean, sd and n."""
    lines = []
    for row in manifest["rows"]:
        line = {"row": row["label"], "series": row["series"], "model": str(row.get("model", "0"))}
        for col in manifest["columns"]:
            v = vals[(vals["row"] == row["label"]) & (vals["column"] == col)]["value"]
            line[f"{col} paper"] = row.get(col)
            line[f"{col} ours mean"] = v.mean()
            line[f"{col} ours sd"] = v.std(ddof=1) if len(v) > 1 else float("nan")
            line[f"{col} n"] = len(v)
        given = any(row.get(col) is not None for col in manifest["columns"])
        line["paper source"] = row.get("source") or ("" if given else NO_PAPER)
        lines.append(line)
    return pd.DataFrame(lines)


NO_PAPER = "none: the experiments file gives no paper number for this row"


def markdown(manifest: dict, paper: pd.DataFrame) -> str:
    """The side-by-side table; a paper cell without a number reads 'none' (its row's source says why)."""
    cols = ", ".join(f"{c} = {label(c)}" for c in manifest["columns"])
    text = (f"# {manifest['paper']} {manifest['figure']} ({manifest['scale']}): {manifest['title']}\n\n"
            f"Mirrors: {manifest.get('source', '')}. Columns: {cols}. Ours: mean, sample standard deviation "
            f"and count over seeds (churn: over pairs of seeds). Paper numbers: replications/"
            f"{manifest['paper']}/experiments.yaml, each with its source; 'none': the paper gives no number "
            f"for the row, and its source column says why.\n\n")
    if manifest.get("notes"):
        text += manifest["notes"] + "\n\n"
    shown = paper.copy()
    for col in manifest["columns"]:
        shown[f"{col} paper"] = [("none" if pd.isna(v) else f"{v:.4g}") for v in shown[f"{col} paper"]]
    return text + shown.to_markdown(index=False, floatfmt=".4g") + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("runs", "values", "paper", "markdown"):
        p.add_argument(f"--{name}", required=True)
    for name in ("table", "curves"):
        p.add_argument(f"--{name}", help="required unless --from-values")
    p.add_argument("--from-values", action="store_true",
                   help="read --values (written before) instead of computing it: redraws the _paper tables from "
                        "committed values without the runs (churn needs their predictions)")
    args = p.parse_args(argv)
    manifest = json.loads(Path(args.runs).read_text())
    if not args.from_values and not (args.table and args.curves):
        p.error("--table and --curves are required unless --from-values")
    if args.from_values:
        vals = pd.read_csv(args.values, dtype={"seed": str})
    else:
        vals = values(manifest, pd.read_csv(args.table), pd.read_csv(args.curves))
        atomic_write_text(args.values, vals.to_csv(index=False))
    paper = side_by_side(manifest, vals)
    atomic_write_text(args.paper, paper.to_csv(index=False))
    atomic_write_text(args.markdown, markdown(manifest, paper))
    print(f"{manifest['paper']} {manifest['figure']}: {len(paper)} rows, {len(vals)} values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
