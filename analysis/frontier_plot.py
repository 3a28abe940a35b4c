"""A workload's frontier figure from its _points.csv: left, final quality (mean, 90% t interval
over seeds: the claims' convention, named in the figure) against between-group bytes per update
(log x, counted: no interval), the Pareto front joined; right, each point's projected run time
at the spec's bandwidths (linear from 0: how much of it the network adds). Every text stays
inside the canvas (figure_data.fit; tests/test_figure_layout.py).

    python analysis/frontier_plot.py --runs W_runs.json --points W_points.csv --out W.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figure_data import label as metric_label  # noqa: E402
from analysis.figure_data import INTERVAL_NOTE, fit, save_png  # noqa: E402
from analysis.frontier_table import gbps_column  # noqa: E402

MARKERS = {"allreduce": "s", "powersgd": "D", "codistill": "o", "model_average": "^", "ensemble_compress": "v",
           "diloco": "P"}


def draw(manifest: dict, pts: pd.DataFrame, out: str) -> None:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.25, 1]})
    colors = {a: f"C{i}" for i, a in enumerate(dict.fromkeys(pts.algorithm))}
    for _, r in pts.iterrows():
        ax.errorbar(r.between_group_bytes_per_update, r.quality_mean,
                    yerr=[[r.quality_mean - r.quality_low], [r.quality_high - r.quality_mean]],
                    fmt=MARKERS.get(r.algorithm, "o"), color=colors[r.algorithm], ms=7, capsize=3,
                    mfc=colors[r.algorithm] if r.pareto else "white")
        ax.annotate(r.label, (r.between_group_bytes_per_update, r.quality_mean), fontsize=7,
                    xytext=(5, 4), textcoords="offset points")
    front = pts[pts.pareto].sort_values("between_group_bytes_per_update")
    ax.step(front.between_group_bytes_per_update, front.quality_mean, where="post", color="k", lw=1, ls="--",
            label="Pareto front (filled markers)")
    ax.set_xscale("log")
    ax.set_xlabel("between-group bytes per rank per update (log)")
    ax.set_ylabel(f"final {metric_label(pts.metric.iloc[0])}\n(mean of {pts.seeds.min()}+ seeds, 90% t interval)")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8)
    bw = manifest["bandwidths_gbps"]
    y = range(len(pts))
    h = 0.8 / len(bw)
    for j, b in enumerate(bw):
        bx.barh([i + j * h for i in y], pts[gbps_column(b)], height=h, label=f"{b:g} Gb/s", color=f"C{j}")
    bx.set_yticks([i + h * (len(bw) - 1) / 2 for i in y], pts.label, fontsize=8)
    bx.invert_yaxis()
    bx.set_xlabel("projected run time (s):\nmeasured compute + alpha-beta communication")
    bx.legend(fontsize=8, title="between groups")
    bx.grid(True, axis="x", which="both", alpha=0.2)
    import textwrap
    fig.suptitle(textwrap.fill(f"communication frontier, {manifest['workload']} ({manifest['regime']} regime): "
                               f"{manifest['title']}", 140), fontsize=10)
    foot = fig.text(0.01, 0.01, textwrap.fill(INTERVAL_NOTE.replace("; dots: single seeds", "") + " Bytes are counted "
                                              "(the same on every seed): no interval.", 190), fontsize=7, va="bottom")
    fit(fig, foot)
    save_png(fig, out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True)
    p.add_argument("--points", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    draw(json.loads(Path(a.runs).read_text()), pd.read_csv(a.points), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
