"""Draw a `curves` figure: each panel's metric vs step (and vs training wall time when the
spec's `x` lists wall_s), one line per series: the mean over seeds at every evaluation, with a
band for its 90% t interval (the claims' convention: figure_data.t_band). Each series shows the model the spec's `models` names (default
"0", the first local model; e.g. "ensemble" for an ensemble's output, "G" for EC-DNN's
global model). The paper's reference statements are printed under the plot.

    python analysis/plot_curves.py --runs R_runs.json --table R.csv --curves R_curves.csv --out R.png
"""
from __future__ import annotations

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figure_data import INTERVAL_NOTE, default_metric, finish, label, mean_curve, series_model  # noqa: E402

X_LABELS = {"step": "step (updates)", "wall_s": "training wall time (s)"}
TARGET_NOTE = ("Dashed grey line, 'workload target': the level at which the run tables time each run's "
               "step_to_target, set by the workload (the target() of codist.workloads: on embedded data derived from "
               "the generator's Bayes optimum, e.g. 0.75 x its accuracy bound for images); not a claim's threshold.")


def plot(manifest: dict, table: pd.DataFrame, curves: pd.DataFrame, out) -> None:
    panels = manifest.get("panels") or [default_metric(manifest, table)]
    xs = manifest.get("x") or ["step"]
    xs = [xs] if isinstance(xs, str) else xs
    order = [s for s in manifest["series"] if s in set(curves["series"])]
    cells = [(m, x) for m in panels for x in xs]
    width = max(9.0, 5.2 * len(cells))
    has_target = False
    fig, axes = plt.subplots(1, len(cells), figsize=(width, 4.6), squeeze=False)
    for ax, (metric, x) in zip(axes[0], cells):
        for series in order:
            model = series_model(manifest, series)
            c = mean_curve(curves, series, model, metric).dropna(subset=["mean"])
            c["step"] += (manifest.get("offsets") or {}).get(series, 0)   # runs that continue another
            seeds = int(c["seeds"].max())
            name = series + (f" [{model}]" if model != "0" else "") + (f" ({seeds} seeds)" if seeds > 1 else "")
            line, = ax.plot(c[x], c["mean"], marker="o", markersize=2.5, label=name)
            if seeds > 1:
                ax.fill_between(c[x], c["low"], c["high"], color=line.get_color(), alpha=0.18, linewidth=0)
        target = table["target"].dropna()
        drawn = metric == table["metric"].iloc[0] and len(target)
        if drawn:
            ax.axhline(target.iloc[0], color="grey", linestyle="--", linewidth=1,
                       label=f"workload target {target.iloc[0]:.3g}")
            has_target = True
        ax.set_xlabel(X_LABELS.get(x, x))
        ax.set_ylabel(label(metric))
        ax.grid(alpha=0.3)
        if ax is axes[0][0] or drawn:
            ax.legend(fontsize=7)
    finish(fig, manifest, out,
           notes=(INTERVAL_NOTE.replace("dots: single seeds", "bands: that interval at each evaluation"),
                  TARGET_NOTE if has_target else ""))


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
