"""Draw a `bars` figure: each panel's metric at the last evaluation, one bar per series (mean
over seeds, error bar = sample sd, dots = seeds), in the spec's series order; e.g. Sodhani
Fig. 6 (accuracy of all-reduce and codistillation at each training-set size).

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

from figure_data import default_metric, finals, finish, label, series_model  # noqa: E402


def plot(manifest: dict, table: pd.DataFrame, curves: pd.DataFrame, out) -> None:
    panels = manifest.get("panels") or [default_metric(manifest, table)]
    order = [s for s in manifest["series"] if s in set(curves["series"])]
    width = max(9.0, 1.3 * len(order) * len(panels) + 3)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 4.6), squeeze=False)
    x = np.arange(len(order))
    for ax, metric in zip(axes[0], panels):
        vals = [finals(curves, s, series_model(manifest, s), metric).to_numpy() for s in order]
        ax.bar(x, [v.mean() for v in vals], 0.6, yerr=[v.std(ddof=1) if len(v) > 1 else 0 for v in vals],
               capsize=3, color=[f"C{i % 10}" for i in range(len(order))], alpha=0.8)
        for i, v in enumerate(vals):
            ax.scatter(np.full(len(v), i), v, color="black", s=8, zorder=3)
        ax.set_xticks(x, order, rotation=25, ha="right", fontsize=8)
        ax.set_ylabel(label(metric) + " at the end")
        lo = min(v.min() for v in vals)
        hi = max(v.max() for v in vals)
        ax.set_ylim(lo - 0.15 * (hi - lo + 1e-9), hi + 0.15 * (hi - lo + 1e-9))
        ax.grid(axis="y", alpha=0.3)
    finish(fig, manifest, out, wrap=int(width * 15))


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
