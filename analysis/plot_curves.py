"""Draw a `curves` figure: the metric vs step and vs training wall time, one line per series.

Each line is the mean over seeds at every evaluation step (wall time: the seeds' mean
wall time at that step); with more than one seed a band shows the min-max range. Only
the headline model's rows are drawn (the model summary.json reports). The inputs are the
tables aggregate.py wrote, plus `{figure}_runs.json` for the title and series order.

    python analysis/plot_curves.py --runs R_runs.json --table R.csv --curves R_curves.csv --out R.png
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

# Axis labels with units for the metrics workloads report; others are shown by name.
METRIC_LABELS = {
    "val_accuracy": "validation accuracy (fraction)",
    "val_loss": "validation cross-entropy (nats)",
    "val_log_loss": "validation log loss (nats)",
    "val_bleu": "validation BLEU",
}
X_AXES = [("step", "step (updates)"), ("wall_s", "training wall time (s)")]


def series_curves(curves: pd.DataFrame, metric: str) -> dict[str, pd.DataFrame]:
    """series -> per-step mean/min/max of the metric, mean wall_s and the seed count."""
    head = curves[curves["headline"].astype(str) == "True"]
    out = {}
    for label, df in head.groupby("series", sort=False):
        g = df.groupby("step")
        out[label] = pd.DataFrame({
            "mean": g[metric].mean(), "min": g[metric].min(), "max": g[metric].max(),
            "wall_s": g["wall_s"].mean(), "seeds": g["seed"].nunique(),
        }).reset_index()
    return out


def plot(manifest: dict, table: pd.DataFrame, curves: pd.DataFrame, out: str | os.PathLike) -> None:
    """Two panels (vs step, vs wall time) written to `out` as PNG."""
    metric = table["metric"].iloc[0]
    by_series = series_curves(curves, metric)
    order = [s for s in manifest["series"] if s in by_series]
    targets = table["target"].dropna()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for ax, (x, xlabel) in zip(axes, X_AXES):
        for label in order:
            c = by_series[label]
            xs = c["step"] if x == "step" else c["wall_s"]
            seeds = int(c["seeds"].max())
            line, = ax.plot(xs, c["mean"], marker="o", markersize=3,
                            label=label if seeds == 1 else f"{label} ({seeds} seeds)")
            if seeds > 1:
                ax.fill_between(xs, c["min"], c["max"], color=line.get_color(), alpha=0.2, linewidth=0)
        if len(targets):
            ax.axhline(targets.iloc[0], color="grey", linestyle="--", linewidth=1, label="target")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(METRIC_LABELS.get(metric, metric))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{manifest['paper']} {manifest['figure']} ({manifest['scale']} scale): {manifest['title']}",
                 fontsize=10)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    os.replace(tmp, out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="{figure}_runs.json written by the workflow")
    p.add_argument("--table", required=True, help="per-run table from aggregate.py (CSV)")
    p.add_argument("--curves", required=True, help="curves table from aggregate.py (CSV)")
    p.add_argument("--out", required=True, help="output PNG")
    args = p.parse_args(argv)
    with open(args.runs) as f:
        manifest = json.load(f)
    plot(manifest, pd.read_csv(args.table), pd.read_csv(args.curves), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
