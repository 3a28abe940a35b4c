"""The paper's effect on a claim's own scale (positive = as claimed; a speedup's ratio): the claim's
`paper_effect` where experiments.yaml states it, else derived from the numbers the file already
holds:
  - the figure's table rows at the paper's own scale (the full-scale series of the claim,
    Claim.at("full")), computed as ours is (e.g. Sun CIFAR-10: 1 - 8.43% minus 1 - 10.3%);
  - a speedup the paper states as a number ("1.36x", "up to 2.24x", "27k / ~10k = 2.7x").
Where both exist they must agree (tests/test_claims_summary.py). Used by the claims table's power
column (analysis/claims.py) and the summary figure's red diamond (analysis/plot_claims_summary.py).
"""
from __future__ import annotations

import re

from analysis.figure_data import higher_is_better

SPEEDUP_TEXT = re.compile(r"^(?:up to |.*= )?~?(\d+(?:\.\d+)?)x$")


def row_value(row: dict, metric: str):
    """A table row's paper number for `metric` (val_accuracy from an error_pct), or None."""
    if row.get(metric) is not None:
        return float(row[metric])
    if metric == "val_accuracy" and row.get("error_pct") is not None:
        return 1 - float(row["error_pct"]) / 100
    return None


def derived(claim, spec) -> float | None:
    """The paper's effect from the figure's rows or the speedup text (module docstring); None otherwise."""
    if claim.measure == "speedup":
        m = SPEEDUP_TEXT.match(claim.paper.strip())
        return float(m.group(1)) if m else None
    if claim.measure not in ("final", "churn") or claim.a2:
        return None
    c = claim.at("full")
    fig = spec.figures[c.figure]
    models = fig.models or {}
    metric = "churn" if c.measure == "churn" else (c.metric or (fig.panels or [None])[0])

    def value(series, model):
        model = model or models.get(series, "0")
        rows = [r.model_dump() for r in fig.rows or [] if r.series == series and r.model == model]
        return row_value(rows[0], metric) if rows else None

    a, b = value(c.a, c.a_model), value(c.b, c.b_model)
    if a is None or b is None or metric is None:
        return None
    if c.measure == "churn":
        return b - a
    return (a - b) * (1.0 if higher_is_better(metric) else -1.0)


def of(claim, spec) -> float | None:
    """The claim's stated `paper_effect`, else the derived one."""
    return claim.paper_effect if claim.paper_effect is not None else derived(claim, spec)
