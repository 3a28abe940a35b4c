"""What every analysis script reads the same way: a figure's spec, its curves per series and
model, final values per seed, metric directions and labels, and atomic PNG writes.

A figure's `{figure}_runs.json` (written by the workflow from replications/<paper>/experiments.yaml)
carries the spec keys the scripts use: `panels` (metric per panel), `models` (series -> the
model whose rows it shows; default "0", the first local model), `x`, `rows`, `columns`,
`reference` (the paper's numbers with their sources).
"""
from __future__ import annotations

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


def mean_curve(curves: pd.DataFrame, series: str, model: str, metric: str) -> pd.DataFrame:
    """Per evaluation step: mean, min and max over seeds of the metric, mean wall_s, seed count."""
    rows = model_rows(curves, series, model).assign(_v=lambda d: metric_column(d, metric))
    g = rows.groupby("step")
    return pd.DataFrame({"mean": g["_v"].mean(), "min": g["_v"].min(), "max": g["_v"].max(),
                         "wall_s": g["wall_s"].mean(), "seeds": g["seed"].nunique()}).reset_index()


def save_png(fig, out: str | os.PathLike) -> None:
    """Write the figure atomically (a killed job never leaves a half PNG)."""
    import matplotlib.pyplot as plt
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    os.replace(tmp, out)


def title(manifest: dict) -> str:
    return f"{manifest['paper']} {manifest['figure']} ({manifest['scale']} scale): {manifest['title']}"


def finish(fig, manifest: dict, out, wrap: int = 160) -> None:
    """Title, the paper's reference statements as a footnote, layout, atomic PNG."""
    import textwrap
    refs = "; ".join(f"{r['what']} ({r['source']})" for r in manifest.get("reference") or [])
    fig.suptitle(title(manifest), fontsize=10)
    if refs:
        fig.text(0.01, 0.01, textwrap.fill("Paper: " + refs, wrap), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.08 if refs else 0, 1, 0.95))
    save_png(fig, out)
