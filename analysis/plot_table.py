"""Draw a `table` figure from the `{figure}_values.csv` that paper_table.py wrote.

Quality columns: one panel per column, per row ours as a dot with its 90% t interval over seeds
(the claims' convention, figure_data.t_band; dots: single seeds) on an axis zoomed to the values,
not bars from 0 that hide differences of a few thousandths, and the paper's value as a red
diamond where the experiments file gives one (a row without one says so in its tick label).

Byte columns (comm_bytes_per_update, between_group_bytes_per_update: the same on every seed, so
no interval): what the communication claims compare. Left, the bytes measured here per rank per
update, split into within-group and between-group traffic; right, each claim's accounting
identity (analysis/comm_identity.py): both series' bytes at the paper's own periods and worker
counts, from the measured message sizes, with the ratio the claim tests.

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

from analysis import comm_identity  # noqa: E402
from codist.algorithms.registry import lookup  # noqa: E402
from analysis.figure_data import finish, label, paper_claims, stamped, t_band  # noqa: E402

BYTES = {"comm_bytes_per_update": "comm_sent_bytes_per_rank_per_update",
         "between_group_bytes_per_update": "between_group_sent_bytes_per_rank_per_update"}


def ours(vals: pd.DataFrame, row: str, col: str) -> np.ndarray:
    return vals[(vals["row"] == row) & (vals["column"] == col)]["value"].to_numpy(dtype=float)


def plot_quality(manifest: dict, vals: pd.DataFrame, out) -> None:
    rows, cols = manifest["rows"], manifest["columns"]
    width = max(6.0, 1.1 * len(rows)) * len(cols) ** 0.5 + 2
    fig, axes = plt.subplots(1, len(cols), figsize=(width, 4.8), squeeze=False)
    x = np.arange(len(rows))
    for ax, col in zip(axes[0], cols):
        for i, r in enumerate(rows):
            v = ours(vals, r["label"], col)
            m, lo, hi = t_band(v)
            ax.errorbar([i], [m], yerr=[[m - lo], [hi - m]], fmt="o", color="tab:blue", ms=7, capsize=4,
                        label=f"ours ({manifest['scale']}{stamped(manifest)}): mean, 90% t interval" if i == 0 else None)
            ax.scatter(np.full(len(v), i + 0.12), v, color="black", s=8, zorder=3,
                       label="ours: single seeds" + (" (churn: seed pairs)" if col == "churn" else "") if i == 0 else None)
        paper = [r.get(col) for r in rows]
        given = [(i, p) for i, p in enumerate(paper) if p is not None]
        if given:
            ax.scatter([i for i, _ in given], [p for _, p in given], marker="D", s=45, color="tab:red", zorder=4,
                       label="paper (its setting: the row's source in the _paper table)")
        ticks = [r["label"] + ("" if p is not None else "\n(no paper value)") for r, p in zip(rows, paper)]
        ax.set_xticks(x, ticks, rotation=25, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylabel(label(col))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    finish(fig, manifest, out)


def identities(manifest: dict, vals: pd.DataFrame) -> list[dict]:
    """Each comm_ratio claim of this figure with an identity: both series' bytes per rank per
    update at the paper's setting (comm_identity's closed forms on the measured message sizes)."""
    table = (vals.pivot_table(index="series", columns="column", values="value", aggfunc="first")
             .rename(columns=BYTES).reset_index())
    configs = manifest.get("configs") or {}
    out = []
    for c in paper_claims(manifest):
        if c.figure != manifest["figure"] or c.measure != "comm_ratio" or not c.identity:
            continue
        side = {}
        for key, series in (("a", c.a), ("b", c.b)):
            setting = c.identity[key]
            measured = float(table.loc[table["series"] == series, comm_identity.column(setting["algorithm"])].iloc[0])
            side[key] = (series, setting, comm_identity.at_paper(setting, comm_identity.unit_bytes(configs[series], measured)))
        out.append({"id": c.id, "at_least": c.at_least, **side})
    return out


def setting_text(setting: dict) -> str:
    alg = lookup(setting["algorithm"]).title()
    parts = [f"{setting['ranks']} ranks" if "ranks" in setting else "",
             f"{setting['models']} models" if "models" in setting else "",
             f"every {setting['period']:,} updates" if "period" in setting else "every update"]
    return f"{alg}, " + ", ".join(p for p in parts if p)


def plot_bytes(manifest: dict, vals: pd.DataFrame, out) -> None:
    rows = manifest["rows"]
    ids = identities(manifest, vals)
    fig, axes = plt.subplots(1, 2 if ids else 1, figsize=(13 if ids else 8, 4.8), squeeze=False)
    ax = axes[0][0]
    y = np.arange(len(rows))
    total = np.array([ours(vals, r["label"], "comm_bytes_per_update")[:1].sum() for r in rows])
    between = (np.array([ours(vals, r["label"], "between_group_bytes_per_update")[:1].sum() for r in rows])
               if "between_group_bytes_per_update" in manifest["columns"] else None)
    if between is None:   # no split measured: every exchange of these runs crosses model groups (one rank each)
        ax.barh(y, total, color="tab:blue", label="sent per rank per update")
    else:
        ax.barh(y, total - between, color="tab:cyan", label="within a model group")
        ax.barh(y, between, left=total - between, color="tab:red", label="between model groups")
    for i, t in enumerate(total):
        ax.annotate(f"{t:,.0f} B" + (f" ({between[i]:,.0f} between)" if between is not None else ""),
                    (t, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, total.max() * 1.6)
    ax.set_xlabel("bytes sent per rank per update, measured here")
    ax.set_title(f"measured in the {manifest['scale']} runs{stamped(manifest)}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    if ids:
        bx = axes[0][1]
        labels, values, colors = [], [], []
        for k, idn in enumerate(ids):
            for key, color in (("b", "tab:grey"), ("a", "tab:green")):
                series, setting, b = idn[key]
                labels.append(f"{idn['id']}: {setting_text(setting)}")
                values.append(b)
                colors.append(color)
        yy = np.arange(len(values))
        bx.barh(yy, values, color=colors)
        bx.set_xscale("log")
        for i, v in enumerate(values):
            bx.annotate(f"{v:,.4g} B", (v, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        for k, idn in enumerate(ids):
            r = idn["b"][2] / idn["a"][2]
            bx.annotate(f"ratio {r:,.0f}x" + (f" (claim: >= {idn['at_least']:g}x)" if idn["at_least"] else ""),
                        (min(values) * 1.5, 2 * k + 0.5), va="center", fontsize=8, color="black",
                        bbox={"boxstyle": "round", "fc": "white", "ec": "grey", "alpha": 0.9})
        bx.set_yticks(yy, labels, fontsize=8)
        bx.invert_yaxis()
        bx.set_xlim(min(values) / 3, max(values) * 30)
        bx.set_xlabel("bytes per rank per update at the paper's setting (log)")
        bx.set_title("the claims' identity: measured message sizes\nat the paper's periods and worker counts",
                     fontsize=9)
        bx.grid(axis="x", which="both", alpha=0.2)
    note = ("Bytes are counted, not sampled: the same on every seed, so no interval. All-reduce traffic stays "
            "within its model group; codistillation's and EC/MA-DNN's exchanges cross model groups. Right: "
            "analysis/comm_identity.py's closed forms (all-reduce 2(p-1)/p x P every update; codistill (n-1) x S / k; "
            "MA-DNN 2(K-1)/K x S / tau; EC-DNN (K-1) x S / tau) on the message sizes P, S measured in these runs.")
    finish(fig, manifest, out, notes=(note,))


def plot(manifest: dict, vals: pd.DataFrame, out) -> None:
    if set(manifest["columns"]) <= set(BYTES):
        plot_bytes(manifest, vals, out)
    else:
        plot_quality(manifest, vals, out)


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
