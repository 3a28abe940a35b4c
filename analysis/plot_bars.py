"""Draw a `bars` figure: each panel's metric at the last evaluation, one mark per series in the
spec's series order: the mean over seeds with its 90% t interval (the claims' convention,
figure_data.t_band) and the seeds as dots, on an axis zoomed to the values (bars from 0 would
hide differences of a point); e.g. Sodhani Fig. 6 (accuracy of all-reduce and codistillation at
each training-set size).

    python analysis/plot_bars.py --runs R_runs.json --table R.csv --curves R_curves.csv --out R.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figure_data import default_metric, finals, finish, label, series_model, t_band  # noqa: E402


def plot(manifest: dict, table: pd.DataFrame, curves: pd.DataFrame, out) -> None:
    panels = manifest.get("panels") or [default_metric(manifest, table)]
    order = [s for s in manifest["series"] if s in set(curves["series"])]
    width = max(9.0, 1.3 * len(order) * len(panels) + 3)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 4.6), squeeze=False)
    x = np.arange(len(order))
    for ax, metric in zip(axes[0], panels):
        vals = [finals(curves, s, series_model(manifest, s), metric).to_numpy() for s in order]
        for i, v in enumerate(vals):
            m, lo, hi = t_band(v)
            ax.errorbar([i], [m], yerr=[[m - lo], [hi - m]], fmt="o", ms=7, capsize=4, color=f"C{i % 10}")
            ax.scatter(np.full(len(v), i + 0.12), v, color="black", s=8, zorder=3)
        ax.set_xticks(x, order, rotation=25, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_ylabel(label(metric) + " at the end")
        ax.grid(axis="y", alpha=0.3)
    finish(fig, manifest, out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--curves", required=True)
    p.add_argument("--out", required=True, help="output PNG")
    args = p.parse_args(argv)
    plot(json.loads(Path(args.runs).read_text()), pd.read_csv(args.table), pd.read_csv(args.curves), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
