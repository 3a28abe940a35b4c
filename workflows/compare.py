"""Your replication beside the reference: every table and every claim of `--results` compared with
the committed `--reference` (results/), and the machines each was made on.

    python workflows/compare.py --results results-local [--reference results] [--scale embedded]

Writes <results>/<scale>/comparison.md and comparison.csv and prints the summary (what
`make replicate` ends with). Timing columns (names with an `_s` unit) are left out everywhere:
they differ between machines and runs. Each table (`*.csv` under <scale>/, not runs/) gets one
outcome:

- **bit-identical**: every other column equal, value for value;
- **within seed noise**: same rows and labels, and every metric of every group of seeds (a
  series' seeds at one step, model, row ...) differs from the reference's by less than the seeds
  explain: |mean_yours - mean_ref| <= t * sqrt(sd_ref^2/n_ref + sd_yours^2/n_yours), t the
  two-sided 95% quantile with n_ref + n_yours - 2 degrees of freedom, Bonferroni-corrected over
  the table's cells (quantile 1 - 0.025/cells), so a table of a thousand curve points is not
  called different because one point in twenty falls outside by chance. Tables of means (a
  `_paper` table's `<x> ours mean`, `<x> ours sd`, `<x> n`) are judged from those; claims from
  `effect_mean`, `effect_sd`, `n`, each claim on its own (95%);
- **different**: anything else (other labels or run ids, a deterministic number changed, a seed
  group with no spread to judge by, a target reached in another number of seeds, a difference
  the seeds do not explain); the first cells that differ are named;
- **missing** / **not regenerated**: a table only one side has.

Each claim is listed with the reference's verdict and yours side by side. The machines come from
the runs' manifest.json (`hardware`: CPU model, torch's CPU capability, BLAS, threads) and, for a
results folder without runs/ (the committed reference), its `machine.json`.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
from scipy import stats

from workflows.machine import describe, summarize

ROOT = Path(__file__).resolve().parents[1]
TIMING = re.compile(r"_s(_|$)")   # a column measured in seconds
#: columns naming a group of seeds (whichever a table has); `seed` is the replicate
KEYS = ("workload", "label", "algorithm", "knob", "period", "series", "row", "model", "column", "metric",
        "headline", "step", "samples", "target", "world_size", "models", "steps", "higher_is_better")
NOT_TABLES = ("runs", "configs", "logs")
OUTCOMES = ("bit-identical", "within seed noise", "different", "missing", "not regenerated")


def compared_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if not TIMING.search(c)]


def _plain(v):
    return v.item() if hasattr(v, "item") else v   # numpy scalars print as plain numbers


def exact_differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Differences between two tables in their non-timing columns (none: [])."""
    if list(a.columns) != list(b.columns):
        return [f"columns differ: {list(a.columns)} vs {list(b.columns)}"]
    if len(a) != len(b):
        return [f"{len(a)} rows in the reference, {len(b)} here"]
    out = []
    for col in compared_columns(a):
        same = (a[col] == b[col]) | (a[col].isna() & b[col].isna())
        if not same.all():
            rows = list(same[~same].index[:3])
            out.append(f"column {col!r}: {int((~same).sum())} row(s) differ, e.g. row {rows[0]}: "
                       f"{_plain(a[col][rows[0]])!r} in the reference vs {_plain(b[col][rows[0]])!r} here")
    return out


def _fmt(x: float) -> str:
    return f"{x:.4g}"


class Cells:
    """Per-cell noise checks of one table: (where, ref mean/sd/n, your mean/sd/n) or a plain difference."""

    def __init__(self):
        self.tests: list[tuple[str, float, float, int, float, float, int]] = []
        self.broken: list[str] = []   # differences no seed spread can explain

    def add(self, where: str, mr, sr, nr, ml, sl, nl) -> None:
        if nr < 2 or nl < 2:
            self.broken.append(f"{where}: {_fmt(mr)} in the reference vs {_fmt(ml)} here, one seed: no spread to judge by")
        elif sr == 0 and sl == 0:
            self.broken.append(f"{where}: {_fmt(mr)} in the reference vs {_fmt(ml)} here, the same in every seed")
        else:
            self.tests.append((where, mr, sr, nr, ml, sl, nl))

    def outside(self, cells: int, level: float = 0.05) -> list[str]:
        """The tested cells whose difference the seeds do not explain, Bonferroni over `cells`."""
        out = []
        for where, mr, sr, nr, ml, sl, nl in self.tests:
            half = stats.t.ppf(1 - level / 2 / max(cells, 1), nr + nl - 2) * math.sqrt(sr**2 / nr + sl**2 / nl)
            if abs(ml - mr) > half:
                out.append(f"{where}: mean {_fmt(ml)} here vs {_fmt(mr)} in the reference, "
                           f"difference {_fmt(ml - mr)} outside +-{_fmt(half)}")
        return out


def _group_name(keys: tuple, names: list[str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(names, keys))


def seed_keys(df: pd.DataFrame) -> list[str]:
    return [k for k in KEYS if k in df.columns]


def seed_cells(ref: pd.DataFrame, loc: pd.DataFrame) -> tuple[Cells, int]:
    """A per-seed table (a `seed` column; its labels already equal row for row): each (group of
    seeds, metric) is one cell."""
    cells, count = Cells(), 0
    keys = seed_keys(ref)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(ref[k].astype(str) for k in keys)) if keys else [()] * len(ref)):
        groups.setdefault(key, []).append(i)
    measures = [c for c in compared_columns(ref) if c not in keys and c != "seed"
                and pd.api.types.is_numeric_dtype(ref[c]) and pd.api.types.is_numeric_dtype(loc[c])]
    for col in measures:
        for key, rows in groups.items():
            count += 1
            r, l = ref[col].iloc[rows], loc[col].iloc[rows]
            if sorted(r.dropna()) == sorted(l.dropna()) and r.isna().sum() == l.isna().sum():
                continue
            where = f"{col} [{_group_name(key, keys)}]"
            if r.isna().sum() != l.isna().sum():
                cells.broken.append(f"{where}: a value in {int(r.notna().sum())} of {len(r)} seeds in the reference, "
                                    f"{int(l.notna().sum())} of {len(l)} here")
                continue
            r, l = r.dropna(), l.dropna()
            cells.add(where, r.mean(), r.std(ddof=1) if len(r) > 1 else 0.0, len(r),
                      l.mean(), l.std(ddof=1) if len(l) > 1 else 0.0, len(l))
    return cells, count


def mean_triples(columns) -> list[tuple[str, str, str, str]]:
    """(name, mean, sd, n) column triples of a table of means: a `_paper` table's `<x> ours mean`,
    `<x> ours sd`, `<x> n`; a claims table's effect; a frontier point's quality."""
    out = []
    for c in columns:
        if c.endswith(" ours mean"):
            base = c[: -len(" ours mean")]
            if f"{base} ours sd" in columns and f"{base} n" in columns:
                out.append((base, c, f"{base} ours sd", f"{base} n"))
    for triple in (("effect", "effect_mean", "effect_sd", "n"), ("quality", "quality_mean", "quality_sd", "seeds")):
        if set(triple[1:]) <= set(columns):
            out.append(triple)
    return out


def mean_cells(ref: pd.DataFrame, loc: pd.DataFrame, triples, label_cols) -> tuple[Cells, int]:
    cells, count = Cells(), 0
    for i in range(len(ref)):
        name = ", ".join(str(ref[c].iloc[i]) for c in label_cols)
        for base, m, s, n in triples:
            mr, ml = ref[m].iloc[i], loc[m].iloc[i]
            if pd.isna(mr) and pd.isna(ml):
                continue
            count += 1
            if mr == ml and ref[s].iloc[i] == loc[s].iloc[i]:
                continue
            if pd.isna(mr) or pd.isna(ml):
                cells.broken.append(f"{base} [{name}]: {mr} in the reference vs {ml} here")
                continue
            cells.add(f"{base} [{name}]", mr, ref[s].iloc[i], int(ref[n].iloc[i]), ml, loc[s].iloc[i], int(loc[n].iloc[i]))
    return cells, count


def judge_table(ref: pd.DataFrame, loc: pd.DataFrame, each_row: bool = False) -> tuple[str, list[str]]:
    """(outcome, the first lines saying why) for one table against the reference's.
    each_row: every row is its own question (a claims table: 95% per claim, no correction)."""
    exact = exact_differences(ref, loc)
    if not exact:
        return "bit-identical", []
    if list(ref.columns) != list(loc.columns) or len(ref) != len(loc):
        return "different", exact
    triples = mean_triples(list(ref.columns))
    if "seed" in ref.columns:   # labels, group keys and seeds fixed; every other number a metric
        fixed = [c for c in compared_columns(ref) if not pd.api.types.is_numeric_dtype(ref[c])
                 or c in seed_keys(ref) or c == "seed"]
        seeded = True
    else:   # a table of means: everything but the means, their sds and what is derived from them is fixed
        judged = {c for t in triples for c in t[1:3]}
        derived = {"interval_low", "interval_high", "quality_low", "quality_high"} if triples else set()
        text = {"regime", "verdict", "reached", "per_seed", "method"} if each_row else set()
        fixed = [c for c in compared_columns(ref) if c not in judged | derived | text]
        seeded = False
    changed = exact_differences(ref[fixed], loc[fixed])
    if changed:
        return "different", changed
    if seeded:
        cells, count = seed_cells(ref, loc)
    else:
        labels = [c for c in ("paper", "id", "row", "series", "model", "label") if c in ref.columns]
        cells, count = mean_cells(ref, loc, triples, labels)
    out = cells.broken + cells.outside(1 if each_row else count)
    return ("different", out) if out else ("within seed noise", [])


def tables(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*.csv")
            if p.relative_to(folder).parts[0] not in NOT_TABLES and p.name != "comparison.csv"}


def compare_tables(ref_dir: Path, loc_dir: Path) -> list[dict]:
    rows = []
    ref_tables, loc_tables = tables(ref_dir), tables(loc_dir)
    for rel in sorted(ref_tables | loc_tables):
        if rel not in loc_tables:
            rows.append({"kind": "table", "name": str(rel), "outcome": "not regenerated", "detail": ""})
        elif rel not in ref_tables:
            rows.append({"kind": "table", "name": str(rel), "outcome": "missing",
                         "detail": "not in the reference"})
        else:
            ref, loc = pd.read_csv(ref_dir / rel), pd.read_csv(loc_dir / rel)
            outcome, why = judge_table(ref, loc, each_row=rel.name == "claims.csv")
            rows.append({"kind": "table", "name": str(rel), "outcome": outcome, "detail": "; ".join(why[:3])
                         + (f"; ... {len(why) - 3} more" if len(why) > 3 else "")})
    return rows


def verdict_head(v) -> str:
    """A verdict's first clause ('holds', 'not in the paper's regime', ...), without its reason."""
    return "" if pd.isna(v) else str(v).split(":", 1)[0]


def effect_text(row) -> str:
    if pd.isna(row["effect_mean"]):
        return ""
    return f"{_fmt(row['effect_mean'])} [{_fmt(row['interval_low'])}, {_fmt(row['interval_high'])}]"


def compare_claims(ref_csv: Path, loc_csv: Path) -> list[dict]:
    """Every claim of the combined claims table: its outcome and both verdicts, side by side."""
    if not (ref_csv.exists() and loc_csv.exists()):
        return []
    ref, loc = pd.read_csv(ref_csv), pd.read_csv(loc_csv)
    mine = {(r["paper"], r["id"]): i for i, r in loc.iterrows()}
    rows = []
    for i, r in ref.iterrows():
        key = (r["paper"], r["id"])
        base = {"kind": "claim", "name": f"{key[0]} {key[1]}", "reference": verdict_head(r["verdict"]),
                "reference_effect": effect_text(r)}
        if key not in mine:
            rows.append({**base, "outcome": "not regenerated", "yours": "", "your_effect": "", "detail": ""})
            continue
        l = loc.loc[mine[key]]
        if str(l["verdict"]).startswith("not tested in this tier"):   # a paper-tier claim: make replicate TIER=paper
            rows.append({**base, "outcome": "not in this tier", "yours": verdict_head(l["verdict"]), "your_effect": "",
                         "detail": ""})
            continue
        outcome, why = judge_table(ref.iloc[[i]].reset_index(drop=True), loc.loc[[mine[key]]].reset_index(drop=True),
                                   each_row=True)
        rows.append({**base, "outcome": outcome, "yours": verdict_head(l["verdict"]), "your_effect": effect_text(l),
                     "verdict": "same" if str(l["verdict"]) == str(r["verdict"]) or
                     verdict_head(l["verdict"]) == verdict_head(r["verdict"]) else "changed",
                     "detail": "; ".join(why[:2])})
    return rows


def machines(folder: Path) -> list[str]:
    """The machines a results folder was made on: its runs' manifests, else its machine.json."""
    manifests = sorted(folder.glob("runs/*/manifest.json"))
    if manifests:
        return describe(summarize(manifests))
    if (folder / "machine.json").exists():
        return describe(json.loads((folder / "machine.json").read_text()).get("machines", []))
    return []


def markdown(rows: list[dict], ref_root: Path, loc_root: Path, scale: str) -> str:
    t = [r for r in rows if r["kind"] == "table"]
    c = [r for r in rows if r["kind"] == "claim"]
    lines = [f"# Your replication ({loc_root}/{scale}) beside the reference ({ref_root}/{scale})", "",
             "Outcomes and how they are judged: `workflows/compare.py` (timing columns left out; within seed",
             "noise: a two-sample t interval per metric and group of seeds at 95%, Bonferroni over each table's",
             "cells; each claim's effect at 95%).", "", "## Machines", ""]
    for name, folder in (("reference", ref_root / scale), ("yours", loc_root / scale)):
        found = machines(folder)
        lines.append(f"- {name}: " + ("; ".join(found) if found else
                                      "not recorded (no runs/ and no machine.json in this folder)"))
    lines += ["", f"## Claims ({summary(c)})", "",
              "| claim | outcome | reference verdict | your verdict | verdict | reference effect [interval] "
              "| your effect [interval] |", "|---|---|---|---|---|---|---|"]
    for r in c:
        lines.append(f"| {r['name']} | {r['outcome']} | {r['reference']} | {r['yours']} | {r.get('verdict', '')} "
                     f"| {r['reference_effect']} | {r['your_effect']} |")
    lines += ["", f"## Tables ({summary(t)})", "", "| table | outcome | why |", "|---|---|---|"]
    for r in t:
        lines.append(f"| `{r['name']}` | {r['outcome']} | {r['detail'].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    n = Counter(r["outcome"] for r in rows)
    return ", ".join(f"{n[o]} {o}" for o in OUTCOMES if n[o])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True, help="your results root (e.g. results-local)")
    p.add_argument("--reference", type=Path, default=ROOT / "results", help="the committed results root")
    p.add_argument("--scale", default="embedded")
    args = p.parse_args(argv)
    ref_dir, loc_dir = args.reference / args.scale, args.results / args.scale
    if ref_dir.resolve() == loc_dir.resolve():
        print(f"compare: {loc_dir} is the reference itself: nothing to compare (git diff shows what changed)")
        return 0
    for d in (ref_dir, loc_dir):
        if not d.is_dir():
            print(f"compare: {d}: no such folder", file=sys.stderr)
            return 2
    rows = compare_tables(ref_dir, loc_dir) + compare_claims(ref_dir / "claims.csv", loc_dir / "claims.csv")
    md, csv = loc_dir / "comparison.md", loc_dir / "comparison.csv"
    md.write_text(markdown(rows, args.reference, args.results, args.scale))
    pd.DataFrame(rows).to_csv(csv, index=False)
    claims = [r for r in rows if r["kind"] == "claim"]
    print(f"your results: {loc_dir}/ (the reference {ref_dir}/ is untouched)")
    print(f"tables: {summary([r for r in rows if r['kind'] == 'table'])}")
    if claims:
        changed = [r for r in claims if r.get("verdict") == "changed"]
        print(f"claims: {summary(claims)}; verdict changed in {len(changed)}"
              + "".join(f"\n  {r['name']}: {r['reference']} (reference) -> {r['yours']} (yours)" for r in changed))
    print(f"comparison, with both verdicts of every claim side by side: {md} (and {csv.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
