"""What every analysis script reads the same way: a figure's spec, its curves per series and
model, final values per seed, metric directions and labels, and atomic PNG writes.

A figure's `{figure}_runs.json` (written by the workflow from replications/<paper>/experiments.yaml)
carries the spec keys the scripts use: `panels` (metric per panel), `models` (series -> the
model whose rows it shows; default "0", the first local model), `x`, `rows`, `columns`,
`reference` (the paper's numbers with their sources).

Every figure draws spread over seeds one way, the claims' own (analysis/stats.py): the mean with
its two-sided 90% t interval, mean -/+ t(0.95, n-1) sd / sqrt(n), whose ends are the one-sided
95% bounds a claim's verdict uses (`t_band`, named in each figure by INTERVAL_NOTE). Quantities
that are the same on every seed (bytes) get no interval.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from codist.workloads import metrics

# Axis labels with units; other metrics are shown by name.
METRIC_LABELS = {
    "val_accuracy": "validation accuracy (fraction)",
    "val_loss": "validation cross-entropy (nats/token)",
    "val_log_loss": "validation log loss (nats)",
    "val_nll": "validation NLL (nats/token)",
    "val_bleu": "validation BLEU",
    "train_loss": "training task loss (mean since last eval)",
    "distill_loss": "distillation term (mean since last eval)",
    "init_distance": "L2 distance from initialisation",
    "error_pct": "validation error (%)",
    "churn": "prediction churn (mean |p_a - p_b|)",
    "comm_bytes_per_update": "bytes sent per rank per update",
    "between_group_bytes_per_update": "bytes sent between model groups per rank per update",
}


def higher_is_better(metric: str) -> bool:
    """The metric's direction, as the workloads declare it (codist.workloads.metrics)."""
    return metrics.higher_is_better(metric)


def label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def default_metric(manifest: dict, table: pd.DataFrame) -> str:
    return (manifest.get("panels") or [table["metric"].iloc[0]])[0]


def series_model(manifest: dict, series: str) -> str:
    """The model a series shows: the spec's `models` entry, else "0" (the first local model)."""
    return str((manifest.get("models") or {}).get(series, "0"))


def model_rows(curves: pd.DataFrame, series: str, model: str) -> pd.DataFrame:
    """Every evaluation row of `model` in the runs of `series` (all seeds), sorted by step."""
    rows = curves[(curves["series"] == series) & (curves["model"].astype(str) == str(model))]
    if rows.empty:
        have = sorted(curves.loc[curves["series"] == series, "model"].astype(str).unique())
        raise ValueError(f"series {series!r} has no rows for model {model!r}; models: {have}")
    return rows.sort_values(["seed", "step"])


def metric_column(rows: pd.DataFrame, metric: str) -> pd.Series:
    """`metric` from the rows; `error_pct` is derived: 100 x (1 - val_accuracy)."""
    if metric == "error_pct":
        return 100.0 * (1.0 - rows["val_accuracy"])
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not in the runs' metrics rows; have: {sorted(rows.columns)}")
    return rows[metric]


def finals(curves: pd.DataFrame, series: str, model: str, metric: str) -> pd.Series:
    """seed -> the metric at the run's last evaluation."""
    rows = model_rows(curves, series, model)
    last = rows.groupby("seed").tail(1).set_index("seed")
    return metric_column(last, metric).rename(series)


INTERVAL_NOTE = ("Spread: mean over seeds with its 90% t interval (mean -/+ t(0.95, n-1) sd/sqrt(n): the ends are "
                 "the one-sided 95% bounds the claims use); dots: single seeds.")


def t_band(values) -> tuple[float, float, float]:
    """(mean, low, high): the claims' interval over independent seeds (low = high = mean for one
    seed or a spread of exactly 0: nothing to draw)."""
    from scipy import stats
    x = pd.Series(values, dtype=float).dropna()
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if n == 1:
        return m, m, m
    half = float(stats.t.ppf(0.95, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    return m, m - half, m + half


def mean_curve(curves: pd.DataFrame, series: str, model: str, metric: str) -> pd.DataFrame:
    """Per evaluation step: mean, the 90% t interval (low, high; t_band), min and max over seeds of
    the metric, mean wall_s, seed count."""
    rows = model_rows(curves, series, model).assign(_v=lambda d: metric_column(d, metric))
    g = rows.groupby("step")
    band = pd.DataFrame([t_band(v) for _, v in g["_v"]], index=pd.Index(list(g.groups), name="step"),
                        columns=["_m", "low", "high"])
    return pd.DataFrame({"mean": g["_v"].mean(), "low": band["low"], "high": band["high"], "min": g["_v"].min(),
                         "max": g["_v"].max(), "wall_s": g["wall_s"].mean(),
                         "seeds": g["seed"].nunique()}).reset_index()


def save_png(fig, out: str | os.PathLike, stamp: str | None = None) -> None:
    """Write the figure atomically (a killed job never leaves a half PNG), with `stamp` written
    across it if given (a rehearsal's manifest has one: workflows/rehearsal.py)."""
    import matplotlib.pyplot as plt
    if stamp:
        fig.text(0.5, 0.5, stamp, ha="center", va="center", rotation=25, fontsize=28, color="tab:red",
                 alpha=0.45, zorder=100)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    os.replace(tmp, out)


def ran(manifest: dict) -> str:
    """What ran, from the runs and their configs (never the spec's words): series, seeds, models
    and ranks per run."""
    runs, configs = manifest.get("runs") or [], manifest.get("configs") or {}
    seeds = {r["series"]: 0 for r in runs}
    for r in runs:
        seeds[r["series"]] += 1
    if not seeds:
        return ""
    per = {s: f"{(c.get('parallel') or {}).get('models', 1)} model(s) x "
              f"{(c.get('parallel') or {}).get('world_size', 1) // max(1, (c.get('parallel') or {}).get('models', 1))}"
              f" rank(s)" for s, c in configs.items() if s in seeds}
    shape = set(per.values())
    n = set(seeds.values())
    return (f"ran: {'; '.join(seeds)}"
            + (f"; {n.pop()} seed(s) each" if len(n) == 1 else "; seeds " + ", ".join(map(str, seeds.values())))
            + (f"; {shape.pop()} per run" if len(shape) == 1 else
               "".join(f"; {s}: {v}" for s, v in per.items())))


def stamped(manifest: dict, sep: str = "; ") -> str:
    """The manifest's stamp (a rehearsal's: workflows/rehearsal.py) after `sep`, for a title or a
    legend that names the scale; "" without one."""
    return f"{sep}{manifest['stamp']}" if manifest.get("stamp") else ""


def title(manifest: dict) -> str:
    head = f"{manifest['paper']} {manifest['figure']} ({manifest['scale']} scale{stamped(manifest)}): {manifest['title']}"
    what = ran(manifest)
    return head + (f"\n{what}" if what else "")


def finish(fig, manifest: dict, out, notes: tuple[str, ...] = (INTERVAL_NOTE,)) -> None:
    """Title and what ran, the notes (the interval convention) and the paper's reference statements
    as a footnote, each wrapped to the canvas's width, a layout that keeps every text inside the
    canvas, atomic PNG."""
    import textwrap
    width = fig.get_figwidth()   # inches; ~11 characters per inch at 10 pt, ~15 at 7 pt (dpi 110)
    refs = "; ".join(f"{r['what']} ({r['source']})" for r in manifest.get("reference") or [])
    foot = [textwrap.fill(n, int(width * 15)) for n in notes if n] + (
        [textwrap.fill("Paper: " + refs, int(width * 15))] if refs else [])
    fig.suptitle("\n".join(textwrap.fill(line, int(width * 11)) for line in title(manifest).split("\n")), fontsize=10)
    fit(fig, fig.text(0.01, 0.01, "\n".join(foot), fontsize=7, va="bottom") if foot else None)
    save_png(fig, out, manifest.get("stamp"))


def fit(fig, foot=None) -> None:
    """tight_layout (which leaves room for the suptitle) above the footnote text `foot`, measured
    on this canvas."""
    bottom = 0.0
    if foot is not None:
        fig.canvas.draw()
        bottom = (foot.get_window_extent().y1 + 6) / fig.bbox.height
    fig.tight_layout(rect=(0, bottom, 1, 1))


REPLICATIONS = Path(__file__).resolve().parents[1] / "replications"


def paper_claims(manifest: dict, replications: Path = REPLICATIONS) -> list:
    """The claims of the figure's paper as they read at the figure's scale (schema.Claim.at), from
    replications/<paper>/experiments.yaml: where the paper's settings for an identity live."""
    import yaml

    from analysis.schema import parse
    path = Path(replications) / manifest["paper"] / "experiments.yaml"
    spec = parse(yaml.safe_load(path.read_text()), path)
    return [c.at(manifest["scale"]) for c in spec.claims]
