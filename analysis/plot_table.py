"""Draw a `table` figure: for each column a panel with, per row, the paper's value (hatched,
where the paper gives one) beside ours (mean over seeds, error bar = sample sd, dots = seeds).
Reads the `{figure}_values.csv` that paper_table.py wrote.

    python analysis/plot_table.py --runs R_runs.json --values R_values.csv --out R.png
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

from figure_data import finish, label  # noqa: E402


def plot(manifest: dict, vals: pd.DataFrame, out) -> None:
    rows, cols = manifest["rows"], manifest["columns"]
    fig, axes = plt.subplots(1, len(cols), figsize=(max(6.0, 1.1 * len(rows)) * len(cols) ** 0.5 + 2, 4.6),
                             squeeze=False)
    x = np.arange(len(rows))
    for ax, col in zip(axes[0], cols):
        ours = [vals[(vals["row"] == r["label"]) & (vals["column"] == col)]["value"].to_numpy() for r in rows]
        paper = [r.get(col) for r in rows]
        if any(p is not None for p in paper):
            ax.bar(x - 0.2, [p if p is not None else 0 for p in paper], 0.4, label="paper", color="lightgrey",
                   hatch="//", edgecolor="grey")
            offset = 0.2
        else:
            offset = 0.0
        ax.bar(x + offset, [v.mean() for v in ours], 0.4, yerr=[v.std(ddof=1) if len(v) > 1 else 0 for v in ours],
               capsize=3, label=f"ours ({manifest['scale']})", color="tab:blue", alpha=0.8)
        for i, v in enumerate(ours):
            ax.scatter(np.full(len(v), i + offset), v, color="black", s=8, zorder=3)
        ax.set_xticks(x, [r["label"] for r in rows], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label(col))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    finish(fig, manifest, out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True)
    p.add_argument("--values", required=True, help="{figure}_values.csv from paper_table.py")
    p.add_argument("--out", required=True, help="output PNG")
    args = p.parse_args(argv)
    plot(json.loads(Path(args.runs).read_text()), pd.read_csv(args.values), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
