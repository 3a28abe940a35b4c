"""Results at a glance: every claim of every paper in one figure, from the combined claims.csv.

One row per claim, grouped by paper: the claim, then a small axis of its own (each claim has its
own measure and unit) with ours as the mean and its one-sided 95% bounds (the two-sided 90% t
interval; a censored speedup has only its upper bound; a byte identity is exact), the neutral
value (no effect), the claim's threshold (`at_least`, or the `within` band), and the paper's
value as a red diamond where the experiments file gives it as a number on the claim's scale
(analysis/paper_effect.py: a claim's `paper_effect`, its figure's table rows at the paper's own
scale, or a speedup the paper states as a number). Otherwise the paper's words are printed beside the claim and nothing is drawn. Right: the
verdict and the regime status (how many pre-registered checks are shown, and the design facts).

    python analysis/plot_claims_summary.py --claims results/embedded/claims.csv --out results/embedded/claims.png
    python analysis/plot_claims_summary.py --claims results/embedded/claims.csv --readme README.md

--readme rewrites the README's RESULTS block (between its markers): this figure and the compact
claims table (claims.compact_table); tests/test_claims_summary.py checks the block is current.
"""
from __future__ import annotations

import argparse
import math
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from analysis.claims import MEASURE_UNITS, compact_table, regime_status, verdict_kind  # noqa: E402
from analysis.paper_effect import of as paper_effect_of  # noqa: E402
from analysis.figure_data import REPLICATIONS, save_png  # noqa: E402
from analysis.schema import MEASURES, parse  # noqa: E402

COLORS = {"holds": "tab:green", "does not hold": "tab:red", "inconclusive": "tab:orange",
          "not in the paper's regime": "tab:purple", "regime not established": "tab:pink", "not tested at this scale": "tab:grey",
          "not tested in this tier": "silver", "underpowered": "tab:brown", "incomplete": "black"}
UNITS = {**MEASURE_UNITS, "comm_ratio": "bytes ratio (x, exact; log axis)"}
ROW_IN = 0.42   # inches per claim row


def paper_effect(claim, spec) -> float | None:
    """The paper's effect on the claim's own scale (analysis/paper_effect.py); None where the paper
    gives no number."""
    return paper_effect_of(claim, spec)


def load_specs(replications: Path, papers) -> dict:
    out = {}
    for p in papers:
        path = Path(replications) / p / "experiments.yaml"
        out[p] = parse(yaml.safe_load(path.read_text()), path)
    return out


def draw_row(ax, r, claim, paper_value) -> None:
    """One claim's small axis: ours, neutral, threshold, the paper's value."""
    neutral = MEASURES[r["measure"]]
    color = COLORS.get(verdict_kind(r["verdict"]), "black")
    xs = [v for v in (r["effect_mean"], r["interval_low"], r["interval_high"], neutral, paper_value,
                      claim.at_least if claim.at_least is not None else None) if v is not None and not pd.isna(v)]
    if claim.within is not None:
        xs += [neutral - claim.within, neutral + claim.within]
        ax.axvspan(neutral - claim.within, neutral + claim.within, color="tab:green", alpha=0.12, lw=0)
    ax.axvline(neutral, color="black", lw=0.8)
    if claim.at_least is not None and claim.at_least != neutral:
        ax.axvline(claim.at_least, color="black", lw=0.8, ls="--")
    m, lo, hi = r["effect_mean"], r["interval_low"], r["interval_high"]
    if r["measure"] == "comm_ratio":
        ax.plot([m], [0], "o", color=color, ms=7)
        ax.set_xscale("log")
    elif pd.isna(lo) and not pd.isna(hi):   # censored speedup: an upper bound only
        ax.plot([min(xs) - 0.1 * (max(xs) - min(xs) + 1e-9), hi], [0, 0], color=color, lw=2)
        ax.plot([hi], [0], "|", color=color, ms=14, mew=2)
        ax.plot([m], [0], "o", mfc="white", color=color, ms=6)
    else:
        ax.errorbar([m], [0], xerr=[[m - lo], [hi - m]], fmt="o", color=color, ms=6, capsize=4, lw=2)
    if paper_value is not None:
        ax.plot([paper_value], [0], "D", color="tab:red", mfc="none", ms=8, mew=1.5)
    lo_x, hi_x = min(xs), max(xs)
    if r["measure"] == "comm_ratio":
        ax.set_xlim(lo_x / 3, hi_x * 3)
    else:
        pad = 0.12 * (hi_x - lo_x or abs(hi_x) or 1)
        ax.set_xlim(lo_x - pad, hi_x + pad)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.tick_params(axis="x", labelsize=6, pad=1, length=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4) if r["measure"] != "comm_ratio"
                               else matplotlib.ticker.LogLocator(numticks=4))
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def draw(df: pd.DataFrame, specs: dict, out, scale: str) -> None:
    papers = list(dict.fromkeys(df["paper"]))
    n_rows = len(df) + len(papers)
    height = n_rows * ROW_IN + 2.4
    fig = plt.figure(figsize=(15, height))
    top = 1 - 1.1 / height
    y = top
    step = ROW_IN / height
    counts = df["verdict"].map(verdict_kind).value_counts()
    # the verdicts that occur (the table's count line names every kind, zeros too)
    # two lines: with every kind present the counts alone fill the canvas's width
    fig.suptitle(f"Every claim of the three papers at the {scale} scale:\n"
                 + ", ".join(f"{counts[k]} {k}" for k in COLORS if counts.get(k, 0)), fontsize=11, y=1 - 0.15 / height)
    fig.text(0.01, top + 0.35 / height, "claim (measure)", fontsize=8, weight="bold")
    fig.text(0.43, top + 0.35 / height, "ours: mean and 90% t interval; paper: red diamond", fontsize=8,
             weight="bold")
    fig.text(0.78, top + 0.35 / height, "verdict (regime status)", fontsize=8, weight="bold")
    claims = {(p, c.id): c.at(scale) for p, s in specs.items() for c in s.claims}
    for paper in papers:
        y -= step
        fig.text(0.01, y + step / 3, f"{paper}: {textwrap.shorten(specs[paper].source, 120)}", fontsize=9,
                 weight="bold", va="center")
        for _, r in df[df["paper"] == paper].iterrows():
            y -= step
            claim = claims[(paper, r["id"])]
            kind = verdict_kind(r["verdict"])
            unit = UNITS[r["measure"]].format(metric=r["metric"] if isinstance(r["metric"], str) else "")
            fig.text(0.01, y + step / 2, textwrap.shorten(f"{r['id']}: {r['claim']}", 78), fontsize=7.5, va="center")
            fig.text(0.01, y + step / 6, textwrap.shorten(f"{unit}; paper: {r['paper_value']}", 90), fontsize=6.5,
                     va="center", color="dimgrey")
            status = regime_status(r)
            fig.text(0.78, y + step / 2, kind, fontsize=8, va="center", color=COLORS.get(kind, "black"),
                     weight="bold")
            fig.text(0.78, y + step / 6, textwrap.shorten(status or (r["verdict"][len(kind):].lstrip(": ")
                                                                      if kind != r["verdict"] else ""), 60),
                     fontsize=6.5, va="center", color="dimgrey")
            if not pd.isna(r["effect_mean"]):
                ax = fig.add_axes((0.43, y + step * 0.28, 0.32, step * 0.6))
                draw_row(ax, r, claim, paper_effect(claim, specs[paper]))
    fig.text(0.01, 0.1 / height, textwrap.fill(
        "Each claim on its own axis (its own measure, oriented so that right of the solid line, the neutral value, "
        "is what the paper claims); dashed: the claim's threshold; green band: its equivalence margin. Ours: the "
        "mean over seeds with its one-sided 95% bounds (the two-sided 90% t interval; churn: seed-level jackknife; a "
        "censored speedup: its upper bound only, hollow dot = mean of the bounds; byte ratios exact). Paper (red "
        "diamond): from the experiments file's table rows at the paper's scale or its stated speedup; otherwise its "
        "words are printed under the claim. Verdicts: analysis/claims.py; data: results/" + scale + "/claims.csv.",
        230), fontsize=6.5, va="bottom")
    save_png(fig, out)


BEGIN = "<!-- RESULTS: written by `python analysis/plot_claims_summary.py --readme README.md` -->"
END = "<!-- /RESULTS -->"


def data_sentence(df: pd.DataFrame) -> str:
    """Which data the tested claims stand on (the claims table's `data` column): generated by codist's
    own code (the stand-ins) or read from a real data set (its verdict says which: claims.verdict_text)."""
    data = df["data"].fillna("").astype(str) if "data" in df.columns else pd.Series("", index=df.index)
    tested = data[data != ""]
    real = int(tested.str.startswith("real").sum())
    return (f"Data: {len(tested) - real} of the {len(tested)} tested claims stand on data codist generates "
            f"(a stand-in), {real} on a real data set, whose verdict says 'real data: <data set>'.")


def readme_block(df: pd.DataFrame, scale: str = "embedded") -> str:
    """The README's results at a glance: the summary figure and the compact table."""
    counts = df["verdict"].map(verdict_kind).value_counts()
    return "\n".join([
        BEGIN, "",
        f"![Every claim at the {scale} scale: ours with its interval, the paper's value, the verdict and the regime "
        f"status](results/{scale}/claims.png)", "",
        f"{len(df)} claims: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in COLORS) + ". Ours: mean [lower, upper] "
        f"one-sided 95% bounds over seeds; the reasons, regime checks, methods and seeds are in "
        f"[results/{scale}/claims.md](results/{scale}/claims.md). " + data_sentence(df), "",
        compact_table(df, details=f"results/{scale}/claims.md").rstrip("\n"), "",
        END])


def readme_with_block(text: str, block: str, path: str = "README.md") -> str:
    head, sep, rest = text.partition(BEGIN)
    if not sep or END not in rest:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block to write the results into")
    return head + block + rest.split(END, 1)[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--claims", required=True, help="the combined claims.csv (analysis/claims.py --combine)")
    p.add_argument("--scale", default="embedded")
    p.add_argument("--replications", type=Path, default=REPLICATIONS, help="folder of <paper>/experiments.yaml")
    p.add_argument("--out", help="the summary figure (PNG)")
    p.add_argument("--readme", type=Path, help="a README whose RESULTS block is rewritten")
    args = p.parse_args(argv)
    df = pd.read_csv(args.claims)
    if args.out:
        draw(df, load_specs(args.replications, dict.fromkeys(df["paper"])), args.out, args.scale)
        print(f"wrote {args.out}")
    if args.readme:
        args.readme.write_text(readme_with_block(args.readme.read_text(), readme_block(df, args.scale), str(args.readme)))
        print(f"wrote the results block of {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
