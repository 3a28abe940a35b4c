"""A dose-response decision: does a stand-in's size knob decide a comparison that ran against the paper?

Issue 49 traced Sun et al.'s verdicts against the paper to shards of 500 images. Figure
`sun2016/cifar100_shards` runs MA-DNN and EC-DNN at K = 4 with shards of 500 and 1,500 images
(series "MA-DNN, <size> a shard", "EC-DNN, <size> a shard"; its 3,000-image arm was cut for wall
time before any outcome was read: the figure's notes); this module reads its per-seed
`_values.csv` (error_pct of each row's model) and applies the rule written in that figure's notes
before any of its runs. Per comparison c, in top-1 points, paired by seed:

    G: c = MA-DNN G's error - EC-DNN G's error      (the paper: cifar100's rows, 5.92 points)
    L: c = MA-DNN L's error - EC-DNN L's error      (the compression ablation: 1.59 points)
    T = c(largest shard) - c(smallest shard)

  "artefact of the shard size": T's one-sided 95% lower bound > 0 and c(largest)'s upper bound
                                >= the paper's effect;
  "finding":                    c(largest)'s upper bound < the paper's effect (the largest shard's
                                data does not bring the paper's result);
  otherwise                     "undecided at n seeds".

EC-DNN's G - L gap (L's error - G's) is reported at each size beside the regime check's bound,
twice the paper's gap (cifar100's EC-DNN rows: 2 x 4.54 points). The paper's numbers come from
the reference figure's rows in the paper's experiments.yaml, never from here.

The figures this applies to, and where each reads the paper's numbers, are DESIGNS (the workflow's
rule `dose_response` writes `<figure>_decision.csv` / `.md` for each):

    python analysis/dose_response.py --figure sun2016/cifar100_shards --values V_values.csv \
        --experiments replications/sun2016/experiments.yaml --csv D_decision.csv --markdown D_decision.md
"""
from __future__ import annotations

import argparse
import math
import numbers
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from analysis import paper_effect, stats
from analysis.schema import SpecError, parse
from codist.runlog import atomic_write_text

SERIES = re.compile(r"^(?P<algo>MA-DNN|EC-DNN), (?P<size>[\d,]+) a shard$")
MODELS = {"G": "G", "L": "0"}        # the comparison's name -> the row's model


@dataclass(frozen=True)
class Design:
    reference: str           # the figure of the same experiments.yaml whose rows hold the paper's numbers
    k: int                   # its rows' K ("MA-DNN G, K=<k>")


#: paper/figure -> where its paper numbers are; a figure listed here gets the decision tables
DESIGNS = {"sun2016/cifar100_shards": Design(reference="cifar100", k=4)}


class DoseError(ValueError):
    """Bad input: one line naming the file and what was expected."""


@dataclass(frozen=True)
class Decision:
    comparison: str          # G or L
    paper_effect: float      # points
    by_size: dict            # size -> stats.Interval of c
    trend: stats.Interval    # T = c(largest) - c(smallest)
    answer: str


def read_values(path: Path) -> pd.DataFrame:
    """error_pct per (algorithm, size, model, seed) from a `_values.csv`."""
    try:
        v = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DoseError(f"{path}: cannot read it as a CSV ({e})") from None
    missing = {"series", "model", "column", "seed", "value"} - set(v.columns)
    if missing:
        raise DoseError(f"{path}: columns {sorted(missing)} missing (expected a paper_table _values.csv)")
    v = v[v["column"] == "error_pct"].copy()
    parsed = v["series"].astype(str).str.extract(SERIES)
    if parsed["algo"].isna().any():
        bad = v["series"][parsed["algo"].isna()].iloc[0]
        raise DoseError(f"{path}: series {bad!r}: expected 'MA-DNN, <size> a shard' or 'EC-DNN, <size> a shard'")
    v["algo"] = parsed["algo"]
    v["size"] = parsed["size"].str.replace(",", "").astype(int)
    v["model"] = v["model"].astype(str)
    v["value"] = pd.to_numeric(v["value"], errors="coerce")
    if v["value"].isna().any() or not v["value"].map(math.isfinite).all():
        raise DoseError(f"{path}: key value: expected a finite error_pct in every row")
    if v["size"].nunique() < 2:
        raise DoseError(f"{path}: expected at least two shard sizes, found {sorted(v['size'].unique())}")
    return v


def paper_effects(experiments: Path, reference: str, k: int) -> tuple[dict[str, float], float]:
    """The paper's effects (points) from the reference figure's rows: {G, L} and EC-DNN's G - L gap."""
    try:   # the validated spec (analysis/schema.py), as the claims read it
        spec = parse(yaml.safe_load(experiments.read_text()), experiments)
    except (OSError, yaml.YAMLError, SpecError) as e:
        raise DoseError(f"{experiments}: cannot read it ({e})") from None
    figure = spec.figures.get(reference)
    rows = {r.label: r for r in (figure.rows or [])} if figure else {}

    def err(label: str) -> float:
        value = paper_effect.row_value(rows[label].model_dump(), "error_pct") if label in rows else None
        if value is None:
            raise DoseError(f"{experiments}: figures.{reference}.rows: expected a row {label!r} with the paper's error_pct")
        return value
    effects = {"G": err(f"MA-DNN G, K={k}") - err(f"EC-DNN G, K={k}"),
               "L": err(f"MA-DNN L, K={k}") - err(f"EC-DNN L, K={k}")}
    return effects, err(f"EC-DNN L, K={k}") - err(f"EC-DNN G, K={k}")


def per_seed(v: pd.DataFrame, algo: str, size: int, model: str) -> pd.Series:
    return v[(v["algo"] == algo) & (v["size"] == size) & (v["model"] == model)].set_index("seed")["value"]


def comparison(v: pd.DataFrame, size: int, model: str) -> pd.Series:
    """c per seed: MA-DNN's error - EC-DNN's (positive: EC-DNN better), seeds both arms ran."""
    return (per_seed(v, "MA-DNN", size, model) - per_seed(v, "EC-DNN", size, model)).dropna()


def decide(v: pd.DataFrame, name: str, paper: float) -> Decision:
    sizes = sorted(v["size"].unique())
    model = MODELS[name]
    by_size = {s: stats.t_interval(comparison(v, s, model)) for s in sizes}
    trend_seeds = (comparison(v, sizes[-1], model) - comparison(v, sizes[0], model)).dropna()
    trend = stats.t_interval(trend_seeds)
    largest = by_size[sizes[-1]]
    if trend.low > 0 and largest.high >= paper:
        answer = "artefact of the shard size"
    elif largest.high < paper:
        answer = "finding"
    else:
        answer = f"undecided at {trend.n} seeds"
    return Decision(name, paper, by_size, trend, answer)


def gaps(v: pd.DataFrame) -> dict:
    """EC-DNN's G - L gap (L's error - G's, points) per size."""
    return {s: stats.t_interval((per_seed(v, "EC-DNN", s, "0") - per_seed(v, "EC-DNN", s, "G")).dropna())
            for s in sorted(v["size"].unique())}


def table(decisions: list[Decision], gap: dict, gap_bound: float) -> pd.DataFrame:
    rows = []
    for d in decisions:
        for s, iv in d.by_size.items():
            rows.append({"quantity": f"{d.comparison}: MA-DNN error - EC-DNN error", "shard": s, "n": iv.n,
                         "mean": iv.mean, "sd": iv.sd, "low": iv.low, "high": iv.high,
                         "paper": d.paper_effect, "answer": ""})
        t = d.trend
        rows.append({"quantity": f"{d.comparison}: trend, largest - smallest shard", "shard": math.nan, "n": t.n,
                     "mean": t.mean, "sd": t.sd, "low": t.low, "high": t.high, "paper": d.paper_effect,
                     "answer": d.answer})
    for s, iv in gap.items():
        rows.append({"quantity": "EC-DNN G - L gap (L error - G error)", "shard": s, "n": iv.n, "mean": iv.mean,
                     "sd": iv.sd, "low": iv.low, "high": iv.high, "paper": gap_bound,
                     "answer": gap_state(iv, gap_bound)})
    out = pd.DataFrame(rows)
    out["shard"] = out["shard"].astype("Int64")
    return out


def gap_state(iv: stats.Interval, bound: float) -> str:
    """The regime check's reading (analysis/regime.py's rule): shown when the upper bound is inside
    the bound, refuted when the lower bound is past it, else not established."""
    if iv.high <= bound:
        return "carries the ensemble (shown)"
    if iv.low > bound:
        return "does not carry it (refuted)"
    return "not established"


def markdown(t: pd.DataFrame, values: Path) -> str:
    def f(x):
        if x is pd.NA or (isinstance(x, float) and math.isnan(x)):
            return ""
        if isinstance(x, float):
            return f"{x:.2f}"
        return f"{x:,}" if isinstance(x, numbers.Integral) else str(x)
    lines = [f"# Dose-response decision ({values.name}; points of top-1, one-sided 95% t bounds)", "",
             "The rule (analysis/dose_response.py, written before the runs): artefact of the shard size when the "
             "trend's lower bound is > 0 and the largest shard's upper bound reaches the paper's effect; finding "
             "when the largest shard's upper bound stays below it; else undecided. `paper`: the paper's effect, "
             "or for the gap the regime check's bound (twice the paper's gap).", "",
             "| quantity | shard | n | mean | sd | low | high | paper | answer |", "|---|---|---|---|---|---|---|---|---|"]
    for r in t.itertuples(index=False):
        lines.append("| " + " | ".join(f(x) for x in r) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--figure", required=True, choices=sorted(DESIGNS), help="paper/figure")
    ap.add_argument("--values", type=Path, required=True)
    ap.add_argument("--experiments", type=Path, required=True)
    ap.add_argument("--csv", type=Path, required=True)
    ap.add_argument("--markdown", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        v = read_values(a.values)
        design = DESIGNS[a.figure]
        effects, gap = paper_effects(a.experiments, design.reference, design.k)
    except DoseError as e:
        print(f"dose_response: {e}", file=sys.stderr)
        return 2
    # values are errors in percent: the effects are in the same points
    t = table([decide(v, name, effects[name]) for name in ("G", "L")], gaps(v), 2 * gap)
    atomic_write_text(a.csv, t.to_csv(index=False, float_format="%.6g"))
    atomic_write_text(a.markdown, markdown(t, a.values))
    print(t.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
