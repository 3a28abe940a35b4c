"""A paper's claims table: each claim in replications/<paper>/experiments.yaml (`claims:`), the
effect measured at this scale on every seed, and a verdict.

A claim compares series `a` with series `b` of one figure (models `a_model` / `b_model`,
default the figure's `models` entry, else "0"), on `metric` (default the figure's first
panel), by one `measure`. The effect is oriented so that a positive value is what the paper
claims (a better than b):
  final       per seed: metric(a) - metric(b) at the last evaluation, sign-flipped for metrics
              where lower is better; with `a2`/`b2`: [a - b] - [a2 - b2] (the gain grows)
  speedup     per seed: steps b needs to reach its own best value (plus `b_offset`: steps b's
              run builds on, e.g. a two-phase student's teacher phase) / steps a needs to reach
              it (0 when a never does); neutral value 1
  churn       per pair of seeds: churn(b) - churn(a) (paper_table.py's values)
  comm_ratio  b's training bytes per rank per update / a's bytes between model groups per rank
              per update (deterministic: the same on every seed); neutral value 1

The verdict rule (README, "Claims"): with n >= 3 seeds, mean m, sample sd s and standard error
se = s / sqrt(n), over the interval [m - 2 se, m + 2 se]:
  `at_least: t` (default: the neutral value, i.e. "a is better"):
      holds if m - 2 se > t; does not hold if m + 2 se < t; inconclusive otherwise.
  `within: w` (the paper claims a match): with d = |m - neutral|,
      holds if d + 2 se <= w; does not hold if d - 2 se > w; inconclusive otherwise.
Fewer than 3 seeds: inconclusive.

    python analysis/claims.py --paper replications/P/experiments.yaml --figures DIR --scale S \
        --csv DIR/claims.csv --markdown DIR/claims.md
    python analysis/claims.py --combine A/claims.csv B/claims.csv --csv all.csv --markdown all.md
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path

import pandas as pd
import yaml

from codist.runlog import atomic_write_text
from figure_data import finals, higher_is_better, model_rows, series_model

MEASURES = {"final": 0.0, "speedup": 1.0, "churn": 0.0, "comm_ratio": 1.0}   # -> neutral value
CLAIM_KEYS = {"id", "claim", "source", "figure", "basis", "measure", "metric", "a", "b", "a_model", "b_model",
              "a2", "b2", "b_offset", "at_least", "within", "paper"}
BASES = {"step-matched", "device-matched", "round-matched"}
MIN_SEEDS = 3
COLUMNS = ["paper", "id", "claim", "source", "basis", "comparison", "measure", "metric", "n", "effect_mean",
           "effect_sd", "interval_low", "interval_high", "rule", "verdict", "paper_value", "per_seed"]


class ClaimError(ValueError):
    """A claim that cannot be evaluated; the message names the file and the claim."""


def steps_to(rows: pd.DataFrame, metric: str, target: float, higher: bool):
    hit = rows[rows[metric] >= target] if higher else rows[rows[metric] <= target]
    return None if hit.empty else int(hit["step"].iloc[0])


def speedups(curves: pd.DataFrame, a: str, am: str, b: str, bm: str, metric: str, b_offset: int = 0) -> pd.Series:
    higher = higher_is_better(metric)
    ra, rb = model_rows(curves, a, am), model_rows(curves, b, bm)
    out = {}
    for seed in sorted(set(ra["seed"]) & set(rb["seed"])):
        sb, sa = rb[rb["seed"] == seed], ra[ra["seed"] == seed]
        target = sb[metric].max() if higher else sb[metric].min()
        step_b, step_a = steps_to(sb, metric, target, higher), steps_to(sa, metric, target, higher)
        out[seed] = 0.0 if step_a is None else (step_b + b_offset) / max(step_a, 1)
    return pd.Series(out, dtype=float)


@functools.lru_cache(maxsize=None)
def read_table(path: Path) -> pd.DataFrame:
    """A figure's CSV, read once however many claims use it (callers only filter it)."""
    return pd.read_csv(path, dtype={"seed": str} if path.name.endswith("_values.csv") else None)


def effects(c: dict, fig: str, manifest: dict, figures: Path) -> pd.Series:
    """Per seed (or seed pair) effect of one claim, oriented so that positive = as claimed."""
    curves = read_table(figures / f"{fig}_curves.csv")
    metric = c.get("metric") or (manifest.get("panels") or [None])[0] or curves["metric"].iloc[0]
    am = str(c.get("a_model") or series_model(manifest, c["a"]))
    bm = str(c.get("b_model") or series_model(manifest, c["b"]))
    measure = c["measure"]
    if measure == "final":
        sign = 1.0 if higher_is_better(metric) else -1.0
        d = sign * (finals(curves, c["a"], am, metric) - finals(curves, c["b"], bm, metric))
        if c.get("a2"):
            d2 = sign * (finals(curves, c["a2"], series_model(manifest, c["a2"]), metric)
                         - finals(curves, c["b2"], series_model(manifest, c["b2"]), metric))
            d = d - d2
        return d.dropna()
    if measure == "speedup":
        return speedups(curves, c["a"], am, c["b"], bm, metric, int(c.get("b_offset", 0)))
    if measure == "churn":
        vals = read_table(figures / f"{fig}_values.csv")
        churn = vals[vals["column"] == "churn"]
        va = churn[churn["series"] == c["a"]].set_index("seed")["value"]
        vb = churn[churn["series"] == c["b"]].set_index("seed")["value"]
        return (vb - va).dropna()
    if measure == "comm_ratio":
        table = read_table(figures / f"{fig}.csv")
        ta = table[table["series"] == c["a"]].set_index("seed")["between_group_sent_bytes_per_rank_per_update"]
        tb = table[table["series"] == c["b"]].set_index("seed")["comm_sent_bytes_per_rank_per_update"]
        return (tb / ta).replace([math.inf], float("nan")).dropna()
    raise ClaimError(f"measure {measure!r}; allowed: {sorted(MEASURES)}")


def verdict(x: pd.Series, neutral: float, at_least, within) -> tuple[str, str, float, float, float, float]:
    """(verdict, rule text, mean, sd, low, high) by the rule in the module docstring."""
    n = len(x)
    m = float(x.mean()) if n else float("nan")
    s = float(x.std(ddof=1)) if n > 1 else float("nan")
    se = s / math.sqrt(n) if n > 1 else float("nan")
    low, high = m - 2 * se, m + 2 * se
    if within is not None:
        rule = f"abs(effect - {neutral:g}) <= {within:g}"
        d = abs(m - neutral)
        v = ("inconclusive" if n < MIN_SEEDS else "holds" if d + 2 * se <= within
             else "does not hold" if d - 2 * se > within else "inconclusive")
    else:
        t = neutral if at_least is None else float(at_least)
        rule = f"effect > {t:g}"
        v = ("inconclusive" if n < MIN_SEEDS else "holds" if low > t
             else "does not hold" if high < t else "inconclusive")
    return v, rule, m, s, low, high


def evaluate(paper_file: Path, figures: Path, scale: str) -> pd.DataFrame:
    doc = yaml.safe_load(paper_file.read_text())
    rows = []
    for c in doc.get("claims") or []:
        where = f"{paper_file}: claim {c.get('id')!r}"
        unknown = sorted(set(c) - CLAIM_KEYS)
        if unknown:
            raise ClaimError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(CLAIM_KEYS)}")
        if c.get("basis") not in BASES:
            raise ClaimError(f"{where}: basis: {c.get('basis')!r}; allowed: {sorted(BASES)}")
        if c.get("measure") not in MEASURES:
            raise ClaimError(f"{where}: measure: {c.get('measure')!r}; allowed: {sorted(MEASURES)}")
        fig = c["figure"]
        runs = figures / f"{fig}_runs.json"
        if not runs.exists():
            raise ClaimError(f"{where}: figure {fig!r} has no {runs} at scale {scale!r}")
        manifest = json.loads(runs.read_text())
        try:
            x = effects(c, fig, manifest, figures)
        except (KeyError, ValueError) as e:
            raise ClaimError(f"{where}: {e}") from None
        v, rule, m, s, low, high = verdict(x, MEASURES[c["measure"]], c.get("at_least"), c.get("within"))
        comparison = f"{c['a']} vs {c['b']}" + (f" minus ({c['a2']} vs {c['b2']})" if c.get("a2") else "")
        rows.append({
            "paper": doc["paper"], "id": c["id"], "claim": c["claim"], "source": c.get("source", ""),
            "basis": c["basis"], "comparison": comparison, "measure": c["measure"],
            "metric": c.get("metric") or (manifest.get("panels") or [""])[0], "n": len(x),
            "effect_mean": m, "effect_sd": s, "interval_low": low, "interval_high": high, "rule": rule,
            "verdict": v, "paper_value": c.get("paper", ""),
            "per_seed": "; ".join(f"{k}: {val:.4g}" for k, val in x.items()),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def markdown(df: pd.DataFrame, heading: str) -> str:
    counts = df["verdict"].value_counts()
    summary = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("holds", "does not hold", "inconclusive"))
    show = df[["paper", "id", "claim", "basis", "measure", "n", "effect_mean", "effect_sd", "interval_low",
               "interval_high", "rule", "verdict", "paper_value"]]
    return (f"# {heading}\n\n{len(df)} claims: {summary}. Effect: positive = as the paper claims; interval = "
            f"mean +/- 2 standard errors over seeds; rule and measures: analysis/claims.py and the README "
            f"('Claims').\n\n" + show.to_markdown(index=False, floatfmt=".4g") + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--paper", help="replications/<paper>/experiments.yaml")
    p.add_argument("--figures", help="results/<scale>/<paper>/ (the figures' tables)")
    p.add_argument("--scale", default="embedded")
    p.add_argument("--combine", nargs="+", help="per-paper claims.csv files to join into one table")
    p.add_argument("--csv", required=True)
    p.add_argument("--markdown", required=True)
    args = p.parse_args(argv)
    if args.combine:
        df = pd.concat([pd.read_csv(f) for f in args.combine], ignore_index=True)
        heading = f"Claims of all papers ({args.scale} scale)"
    else:
        if not (args.paper and args.figures):
            p.error("--paper and --figures are required without --combine")
        df = evaluate(Path(args.paper), Path(args.figures), args.scale)
        heading = f"Claims of {df['paper'].iloc[0] if len(df) else args.paper} ({args.scale} scale)"
    atomic_write_text(args.csv, df.to_csv(index=False))
    atomic_write_text(args.markdown, markdown(df, heading))
    print(f"{len(df)} claims: " + ", ".join(f"{k} {v}" for k, v in df["verdict"].value_counts().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
