"""Your replication beside the reference: every table and every claim of `--results` compared with
the committed `--reference` (results/), and the machines each was made on.

    python workflows/compare.py --results results-local [--reference results] [--scale embedded]

Writes <results>/<scale>/comparison.md and comparison.csv and prints the summary (what
`make replicate` ends with): the tiers that ran, the counts, each table that differs and each claim
whose verdict changed, by name. The machine's measurements (columns named by their unit: seconds
`_s`, rates `_per_s`, megabytes `_mb`, utilisation `mfu`: codist.runlog.machine_column) are left out
everywhere, their presence too: they differ between machines and runs. Each table (`*.csv` under <scale>/, not runs/) gets one
outcome:

- **bit-identical**: every other column equal, value for value;
- **within seed noise**: same rows and labels, and every metric of every group of seeds (a
  series' seeds at one step, model, row ...) differs from the reference's by less than the seeds
  explain: |mean_yours - mean_ref| <= t * sqrt(sd_ref^2/n_ref + sd_yours^2/n_yours), t the
  two-sided 95% quantile with n_ref + n_yours - 2 degrees of freedom, Bonferroni-corrected over
  every cell of the table, equal ones included (quantile 1 - 0.025/cells), so a table of a
  thousand curve points is not called different because one point in twenty falls outside by
  chance; sd is the sample sd (ddof 1). Tables of means (a `_paper` table's `<x> ours mean`,
  `<x> ours sd`, `<x> n`) are judged from those; claims from `effect_mean`, `effect_sd`, `n`, each
  claim on its own (95%);
- **different**: anything else (other labels or run ids, a deterministic number changed, a seed
  group with no spread to judge by: with one seed only bit-identity can be judged, an inf or a NaN
  sd, a target reached in another number of seeds, text where the other side has numbers, a
  difference the seeds do not explain); the first cells that
  differ are named, each with as many digits as show the difference and its relative size;
- **not run in this tier**: a table of a figure of another tier (analysis/schema.py
  TIERS), or a claim, that the tiers which ran do not make (`make replicate TIER=<its tier>` does,
  named per table and claim); never counted as different. In a claims table those claims are left
  out and the rest judged;
- **missing** (only yours has it) / **not regenerated** (only the reference has it, with why: the
  frontier is a target of its own, TARGETS= makes only what it names).

Each claim is listed with the reference's verdict and yours side by side. The machines come from
the runs' manifest.json (`hardware`: CPU model, torch's CPU capability, BLAS, threads) and, for a
results folder without runs/ (the committed reference), its `machine.json`. Runs restored from the run ledger
(`LEDGER=keep`: workflows/run_ledger.py) are counted and said, in the report and the summary: their
numbers are the earlier machine's, not a rerun's.

Malformed input (an empty file, a claims table without `paper`, `id` or `verdict`, a `*.csv` that is
not a regular file: a folder, a named pipe, a symbolic link loop; a manifest whose `hardware` is not
an object) stops it with one line naming the file, before anything is written. Text cells are escaped: `|` in comparison.md, and a
comparison.csv cell starting with = + - @ is prefixed with ' (no spreadsheet formula). Both files
are written atomically, and a comparison.md or .csv that is a symbolic link is refused, never
written through.
"""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import stat
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
from scipy import stats

from analysis.schema import TIERS, tier_command
from codist.runlog import WriteError, atomic_write_text, machine_column
from workflows.experiments import ExperimentsError, load_plan
from workflows import run_ledger
from workflows.machine import MachineError, describe, summarize

ROOT = Path(__file__).resolve().parents[1]
#: columns naming a group of seeds (whichever a table has); `seed` is the replicate
KEYS = ("workload", "label", "algorithm", "knob", "period", "series", "row", "model", "column", "metric",
        "headline", "step", "samples", "target", "world_size", "models", "steps", "higher_is_better")
NOT_TABLES = ("runs", "configs", "logs")
NOT_IN_TIER = "not run in this tier"
OUTCOMES = ("bit-identical", "within seed noise", "different", NOT_IN_TIER, "missing", "not regenerated")
#: analysis/claims.py's verdict for a claim whose figure is in a tier that did not run ("... figure 'f' is
#: in the <tier> tier (make replicate TIER=<tier>)")
UNTESTED = "not tested in this tier"
UNTESTED_TIER = re.compile(r"is in the (\S+) tier")
CLAIM_COLUMNS = ("paper", "id", "verdict")
SHOWN = 8   # names the closing summary lists per kind before '... N more'


class CompareError(Exception):
    """Malformed input or an unsafe output: one line naming the file."""


def _kind(mode: int) -> str:
    """What a path is, for a message saying it is not what was expected."""
    return ("a folder" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
            else "a regular file" if stat.S_ISREG(mode) else "a special file")


def read_table(path: Path) -> pd.DataFrame:
    try:   # stat first: opening a named pipe called *.csv would wait forever for a writer
        mode = os.stat(path).st_mode
    except OSError as e:
        raise CompareError(f"{path}: unreadable ({e.strerror or e}; expected a CSV table)") from None
    if not stat.S_ISREG(mode):
        raise CompareError(f"{path}: {_kind(mode)}, expected a CSV table (a regular file)")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise CompareError(f"{path}: empty, no header row (expected a CSV table with a header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise CompareError(f"{path}: not a readable CSV table ({one_line(e)})") from None
    except OSError as e:
        raise CompareError(f"{path}: unreadable ({e.strerror or e}; expected a CSV table)") from None


def read_claims(path: Path) -> pd.DataFrame:
    df = read_table(path)
    missing = [c for c in CLAIM_COLUMNS if c not in df.columns]
    if missing:
        raise CompareError(f"{path}: no column {missing[0]!r} (a claims table has the columns "
                           f"{', '.join(CLAIM_COLUMNS)})")
    return df


def one_line(text) -> str:
    """Text on one line without control characters (a verdict or error printed or put in a cell)."""
    return re.sub(r"[\x00-\x1f\x7f]+", " ", str(text)).strip()


def compared_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if not machine_column(c)]


def _plain(v):
    return v.item() if hasattr(v, "item") else v   # numpy scalars print as plain numbers


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def versus(ref, yours) -> str:
    """'<ref> in the reference vs <yours> here', with as many digits as tell them apart, and the
    difference relative to the reference's value."""
    a, b = _plain(ref), _plain(yours)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)) or pd.isna(a) or pd.isna(b):
        return f"{a!r} in the reference vs {b!r} here"
    sa, sb = repr(a), repr(b)
    for digits in range(4, 18):
        if f"{a:.{digits}g}" != f"{b:.{digits}g}":
            sa, sb = f"{a:.{digits}g}", f"{b:.{digits}g}"
            break
    rel = f", relative {(b - a) / abs(a):+.2g}" if a != 0 else ""
    return f"{sa} in the reference vs {sb} here (difference {b - a:+.3g}{rel})"


def exact_differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Differences between two tables in their columns of results (none: []): a machine's
    measurements, present on one side only (a run logged before codist measured them), are no difference."""
    if compared_columns(a) != compared_columns(b):
        return [f"columns differ: {compared_columns(a)} vs {compared_columns(b)}"]
    if len(a) != len(b):
        return [f"{len(a)} rows in the reference, {len(b)} here"]
    out = []
    for col in compared_columns(a):
        same = (a[col] == b[col]) | (a[col].isna() & b[col].isna())
        if not same.all():
            row = same.index[~same][0]
            out.append(f"column {col!r}: {int((~same).sum())} row(s) differ, e.g. row {row}: "
                       + versus(a[col][row], b[col][row]))
    return out


class Cells:
    """Per-cell noise checks of one table: (where, ref mean/sd/n, your mean/sd/n) or a plain difference."""

    def __init__(self):
        self.tests: list[tuple[str, float, float, int, float, float, int]] = []
        self.broken: list[str] = []   # differences no seed spread can explain

    def add(self, where: str, mr, sr, nr, ml, sl, nl) -> None:
        if min(nr, nl) < 2:
            self.broken.append(f"{where}: {versus(mr, ml)}, one seed: only bit-identity can be judged (no spread)")
        elif sr == 0 and sl == 0:
            self.broken.append(f"{where}: {versus(mr, ml)}, the same in every seed")
        elif not all(math.isfinite(v) for v in (mr, sr, ml, sl)):   # inf, or a spread not recorded: no interval
            self.broken.append(f"{where}: {versus(mr, ml)}, sd {_plain(sr)!r} in the reference and {_plain(sl)!r} "
                               f"here: no finite spread to judge by")
        else:
            self.tests.append((where, mr, sr, nr, ml, sl, nl))

    def outside(self, cells: int, level: float = 0.05) -> list[str]:
        """The tested cells whose difference the seeds do not explain, Bonferroni over `cells`."""
        out = []
        for where, mr, sr, nr, ml, sl, nl in self.tests:
            half = half_width(sr, nr, sl, nl, cells, level)
            if not abs(ml - mr) <= half:   # a NaN half-width explains nothing (`> nan` would be False)
                out.append(f"{where}: mean {versus(mr, ml)}, outside +-{_fmt(half)}")
        return out


def half_width(sr: float, nr: int, sl: float, nl: int, cells: int, level: float) -> float:
    """How far two means of seeds may lie apart by chance: the two-sided t quantile at `level`,
    Bonferroni over `cells` (>= 1: the tested one among them), times the standard error of their
    difference."""
    return stats.t.ppf(1 - level / 2 / cells, nr + nl - 2) * math.sqrt(sr**2 / nr + sl**2 / nl)


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
            cells.add(where, r.mean(), r.std(ddof=1), len(r), l.mean(), l.std(ddof=1), len(l))   # 1 seed: sd nan
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


def same_value(a, b) -> bool:
    return a == b or (pd.isna(a) and pd.isna(b))


def mean_cells(ref: pd.DataFrame, loc: pd.DataFrame, triples, label_cols) -> tuple[Cells, int]:
    cells, count = Cells(), 0
    for i in range(len(ref)):
        name = ", ".join(str(ref[c].iloc[i]) for c in label_cols)
        for base, m, s, n in triples:
            mr, ml = ref[m].iloc[i], loc[m].iloc[i]
            if pd.isna(mr) and pd.isna(ml):
                continue
            count += 1
            if mr == ml and same_value(ref[s].iloc[i], loc[s].iloc[i]):
                continue
            if pd.isna(mr) or pd.isna(ml):
                cells.broken.append(f"{base} [{name}]: {versus(mr, ml)}")
                continue
            nr, nl = ref[n].iloc[i], loc[n].iloc[i]
            if pd.isna(nr) or pd.isna(nl):
                cells.broken.append(f"{base} [{name}]: {versus(mr, ml)}, no seed count ({n} {_plain(nr)!r} in the "
                                    f"reference, {_plain(nl)!r} here)")
                continue
            cells.add(f"{base} [{name}]", mr, ref[s].iloc[i], int(nr), ml, loc[s].iloc[i], int(nl))
    return cells, count


def text_in_numbers(ref: pd.DataFrame, loc: pd.DataFrame, columns) -> list[str]:
    """The columns of numbers on one side that hold text on the other (pandas reads such a column as
    text, so it is neither a number to judge nor, on its numeric side, text to compare)."""
    out = []
    for col in columns:
        numeric = (pd.api.types.is_numeric_dtype(ref[col]), pd.api.types.is_numeric_dtype(loc[col]))
        if numeric[0] == numeric[1]:
            continue
        side, where = (loc, "here") if numeric[0] else (ref, "in the reference")
        bad = side[col].notna() & pd.to_numeric(side[col], errors="coerce").isna()
        if bad.any():
            row = bad.index[bad][0]
            out.append(f"column {col!r}: {int(bad.sum())} cell(s) not a number {where}, e.g. row {row}: "
                       f"{side[col][row]!r} (numbers on the other side)")
    return out


def judge_table(ref: pd.DataFrame, loc: pd.DataFrame, each_row: bool = False) -> tuple[str, list[str]]:
    """(outcome, the first lines saying why) for one table against the reference's.
    each_row: every row is its own question (a claims table: 95% per claim, no correction)."""
    exact = exact_differences(ref, loc)
    if not exact:
        return "bit-identical", []
    if compared_columns(ref) != compared_columns(loc) or len(ref) != len(loc):
        return "different", exact
    text = {"regime", "verdict", "reached", "per_seed", "method"} if each_row else set()
    mixed = text_in_numbers(ref, loc, [c for c in compared_columns(ref) if c not in text])
    if mixed:   # a column numeric on one side only is never a metric to judge: no seed spread explains text
        return "different", mixed
    triples = mean_triples(list(ref.columns))
    if "seed" in ref.columns:   # labels, group keys and seeds fixed; every other number a metric
        fixed = [c for c in compared_columns(ref) if not pd.api.types.is_numeric_dtype(ref[c])
                 or c in seed_keys(ref) or c == "seed"]
        seeded = True
    else:   # a table of means: everything but the means, their sds and what is derived from them is fixed
        judged = {c for _, mean, sd, _ in triples for c in (mean, sd)}
        derived = {"interval_low", "interval_high", "quality_low", "quality_high"} if triples else set()
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


def claim_keys(df: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(df["paper"].astype(str), df["id"].astype(str)))


def untested(df: pd.DataFrame) -> pd.Series:
    """The claims a tier that did not run would have tested (analysis/claims.py's verdict for them)."""
    return df["verdict"].astype(str).str.startswith(UNTESTED)


def judge_claims_table(ref: pd.DataFrame, loc: pd.DataFrame) -> tuple[str, list[str]]:
    """A claims table: the claims a tier did not run on either side left out, the rest judged."""
    skip = {k for df in (ref, loc) for k, out in zip(claim_keys(df), untested(df)) if out}
    if not skip:
        return judge_table(ref, loc, each_row=True)
    kept = [df[[k not in skip for k in claim_keys(df)]].reset_index(drop=True) for df in (ref, loc)]
    outcome, why = judge_table(*kept, each_row=True)
    mine, theirs = Counter(map(untested_command, loc["verdict"][untested(loc)])), int(untested(ref).sum())
    notes = [f"{n} not run in this tier ({command})" for command, n in mine.items()]
    notes += [f"{theirs} not run in the reference's tier"] if theirs else []
    return outcome, [", ".join(notes) + ", the others judged", *why]


def tables(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*.csv")
            if p.relative_to(folder).parts[0] not in NOT_TABLES and p.name != "comparison.csv"}


def untested_command(verdict) -> str:
    """The command that tests a claim 'not tested in this tier': its figure's tier's, read from the verdict."""
    m = UNTESTED_TIER.search(str(verdict))
    return tier_command(m[1]) if m else "make replicate TIER=<its figure's tier>"


def tier_figures(scale: str, replications: Path = ROOT / "replications") -> dict[tuple[str, str], str]:
    """(paper, figure) -> tier, for every figure outside the default tier: the default tier makes none
    of their tables, each other tier only its own figures'."""
    try:
        plan = load_plan(replications, scale)
    except ExperimentsError as e:
        raise CompareError(f"{replications}: cannot tell which tier makes each table ({one_line(e)})") from None
    return {pf: tier for pf, tier in plan.tier_of.items() if tier != "default"}


def figure_of(rel: Path) -> tuple[str, str]:
    """(paper, figure) whose table `rel` (relative to results/<scale>/) would be."""
    return rel.parent.name, re.sub(r"_(curves|values|paper)$", "", rel.stem)


def of_figures(rel: Path, figures) -> bool:
    """Whether a table (relative to results/<scale>/) belongs to one of `figures` ((paper, figure) pairs)."""
    return figure_of(rel) in figures


def tiers_run(loc_dir: Path, tier_of: dict[tuple[str, str], str]) -> list[str]:
    """The tiers your results hold (in schema.TIERS order): the default tier, and each other tier one of
    whose tables (`tier_of`: tier_figures) or claims (the claims table's `tier` column) is there."""
    claims = loc_dir / "claims.csv"
    held = {tier_of.get(figure_of(t)) for t in tables(loc_dir)}
    if claims.exists() and "tier" in (df := read_claims(claims)).columns:
        held |= set(df["tier"].dropna().astype(str))
    return [t for t in TIERS if t == "default" or t in held]


def tiers_not_run(tiers: list[str], tier_of: dict[tuple[str, str], str]) -> list[str]:
    """The tiers that hold figures (`tier_of`: tier_figures) but did not run (`tiers`), in schema.TIERS order."""
    return [t for t in TIERS if t not in tiers and t in tier_of.values()]


def tier_hints(not_run: list[str], quote: str = "") -> list[str]:
    """Where each tier not run (`not_run`) gets its tables and claims: its command."""
    return [f"the {t} tier's tables and claims: {quote}{tier_command(t)}{quote}" for t in not_run]


def absent_reason(rel: Path, results: Path, scale: str) -> str:
    """Why a table the reference has is not in yours."""
    if rel.parts[0] == "frontier":
        return ("the frontier is a target of its own, not in make replicate: snakemake --profile env/profiles/local "
                f"--cores 2 --config results={results} {results}/{scale}/frontier/frontier.md")
    return f"not made by this run (a run with TARGETS= makes only those; a failed rule: see {results}/{scale}/logs/)"


def compare_tables(ref_dir: Path, loc_dir: Path, tier_of: dict[tuple[str, str], str] | None = None,
                   tiers: tuple[str, ...] = TIERS) -> list[dict]:
    """Every table of either side, judged; one only the reference has is not run in this tier when its
    figure's tier (`tier_of`: tier_figures) is not among `tiers`."""
    rows, tier_of = [], tier_of or {}
    ref_tables, loc_tables = tables(ref_dir), tables(loc_dir)
    results, scale = loc_dir.parent, loc_dir.name
    for rel in sorted(ref_tables | loc_tables):
        row = {"kind": "table", "name": one_line(rel)}
        if rel not in loc_tables:
            if (tier := tier_of.get(figure_of(rel), "default")) not in tiers:
                rows.append({**row, "outcome": NOT_IN_TIER,
                             "detail": f"a {tier}-tier figure's table: {tier_command(tier)}"})
            else:
                rows.append({**row, "outcome": "not regenerated", "detail": absent_reason(rel, results, scale)})
        elif rel not in ref_tables:
            rows.append({**row, "outcome": "missing", "detail": "not in the reference"})
        else:
            if rel.name == "claims.csv":
                outcome, why = judge_claims_table(read_claims(ref_dir / rel), read_claims(loc_dir / rel))
            else:
                outcome, why = judge_table(read_table(ref_dir / rel), read_table(loc_dir / rel))
            rows.append({**row, "outcome": outcome, "detail": listed(why, 3, "; ")})
    return rows


def verdict_head(v) -> str:
    """A verdict's first clause ('holds', 'not in the paper's regime', ...), without its reason."""
    return "" if pd.isna(v) else one_line(str(v).partition(":")[0])


def effect_text(row) -> str:
    if pd.isna(row.get("effect_mean")):
        return ""
    low, high = (row.get(c, math.nan) for c in ("interval_low", "interval_high"))
    return f"{_fmt(row['effect_mean'])} [{_fmt(low)}, {_fmt(high)}]"


def same_verdict(ref, yours) -> bool:
    """Whether two verdicts say the same: equal, or the same first clause (their reasons may differ)."""
    return str(ref) == str(yours) or verdict_head(ref) == verdict_head(yours)


def compare_claims(ref_csv: Path, loc_csv: Path) -> list[dict]:
    """Every claim of the combined claims table: its outcome and both verdicts, side by side."""
    if not (ref_csv.exists() and loc_csv.exists()):
        return []
    ref, loc = read_claims(ref_csv), read_claims(loc_csv)
    mine = dict(zip(claim_keys(loc), range(len(loc))))
    theirs = set(claim_keys(ref))
    rows = []
    for i, key in enumerate(claim_keys(ref)):
        r = ref.iloc[i]
        base = {"kind": "claim", "name": one_line(f"{key[0]} {key[1]}"), "reference": verdict_head(r["verdict"]),
                "reference_effect": effect_text(r)}
        if key not in mine:
            rows.append({**base, "outcome": "not regenerated", "yours": "", "your_effect": "",
                         "detail": "not in your claims table"})
            continue
        l = loc.iloc[mine[key]]
        if str(l["verdict"]).startswith(UNTESTED):   # a claim of a figure of a tier that did not run
            rows.append({**base, "outcome": NOT_IN_TIER, "yours": verdict_head(l["verdict"]), "your_effect": "",
                         "detail": untested_command(l["verdict"])})
            continue
        outcome, why = judge_table(ref.iloc[[i]].reset_index(drop=True), loc.iloc[[mine[key]]].reset_index(drop=True),
                                   each_row=True)
        rows.append({**base, "outcome": outcome, "yours": verdict_head(l["verdict"]), "your_effect": effect_text(l),
                     "verdict": "same" if same_verdict(r["verdict"], l["verdict"]) else "changed",
                     "detail": listed(why, 3, "; ")})
    for key in claim_keys(loc):
        if key not in theirs:
            rows.append({"kind": "claim", "name": one_line(f"{key[0]} {key[1]}"), "outcome": "missing", "reference": "",
                         "reference_effect": "", "yours": verdict_head(loc.iloc[mine[key]]["verdict"]),
                         "your_effect": effect_text(loc.iloc[mine[key]]), "detail": "not in the reference"})
    return rows


def machines(folder: Path) -> list[str]:
    """The machines a results folder was made on: its runs' manifests, else its machine.json."""
    manifests = sorted(folder.glob("runs/*/manifest.json"))
    path = folder / "machine.json"
    try:
        if manifests:
            return describe(summarize(manifests))
        if path.exists():
            return describe(json.loads(path.read_text()).get("machines", []))
    except MachineError as e:
        raise CompareError(str(e)) from None
    except (json.JSONDecodeError, AttributeError, TypeError) as e:
        where = path if not manifests else f"{folder}/runs/*/manifest.json"
        raise CompareError(f"{where}: not a machine record ({one_line(e)})") from None
    except OSError as e:
        raise CompareError(f"{e.filename or path}: unreadable ({e.strerror or e}; expected a JSON file)") from None
    return []


def restored_line(folder: Path) -> str:
    """How many of a replication's runs were restored from the run ledger (workflows/run_ledger.py,
    LEDGER=keep) instead of trained: those are the earlier machine's runs, not a rerun ('' for none)."""
    runs = sorted(p.parent for p in folder.glob("runs/*/summary.json"))
    n = sum(run_ledger.restored(r) for r in runs)
    return (f"{n} of your {len(runs)} runs were restored from the run ledger (LEDGER=keep), not trained here: "
            f"for those, your tables are the earlier machine's runs" if n else "")


def md_cell(v) -> str:
    """A Markdown table cell: one line, its `|` escaped."""
    return one_line(v).replace("|", r"\|")


def csv_cell(v):
    """A CSV cell a spreadsheet will not run: text starting with = + - @ gets a leading '."""
    return f"'{v}" if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") else v


def markdown(rows: list[dict], ref_root: Path, loc_root: Path, scale: str, tiers: list[str],
             not_run: list[str] = ()) -> str:
    """comparison.md: the tiers run, and the command of each tier not run (`not_run`: tiers_not_run),
    the machines, every claim and every table."""
    t = [r for r in rows if r["kind"] == "table"]
    c = [r for r in rows if r["kind"] == "claim"]
    lines = [f"# Your replication ({loc_root}/{scale}) beside the reference ({ref_root}/{scale})", "",
             "Outcomes and how they are judged: `workflows/compare.py` (timing columns left out; within seed",
             "noise: a two-sample t interval per metric and group of seeds at 95%, Bonferroni over each table's",
             "cells; each claim's effect at 95%; with one seed only bit-identity can be judged).", "",
             f"Tiers run: {', '.join(tiers)}."
             + "".join(f" {hint[0].upper()}{hint[1:]}." for hint in tier_hints(not_run, "`")),
             "", "## Machines", ""]
    for name, folder in (("reference", ref_root / scale), ("yours", loc_root / scale)):
        found = machines(folder)
        lines.append(f"- {name}: " + ("; ".join(md_cell(m) for m in found) if found else
                                      "not recorded (no runs/ and no machine.json in this folder)"))
    if line := restored_line(loc_root / scale):
        lines.append(f"- {line}")
    lines += ["", f"## Claims ({summary(c)})", "",
              "| claim | outcome | reference verdict | your verdict | verdict | reference effect [interval] "
              "| your effect [interval] |", "|---|---|---|---|---|---|---|"]
    for r in c:
        lines.append("| " + " | ".join(md_cell(r.get(k, "")) for k in ("name", "outcome", "reference", "yours", "verdict",
                                                                         "reference_effect", "your_effect")) + " |")
    lines += ["", f"## Tables ({summary(t)})", "", "| table | outcome | why |", "|---|---|---|"]
    for r in t:
        lines.append(f"| `{md_cell(r['name'])}` | {r['outcome']} | {md_cell(r['detail'])} |")
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    n = Counter(r["outcome"] for r in rows)
    return ", ".join(f"{n[o]} {o}" for o in OUTCOMES if n[o])


def listed(items: list[str], shown: int, sep: str = ", ") -> str:
    """The first `shown` items, and how many more there are."""
    return sep.join(items[:shown]) + (f"{sep}... {len(items) - shown} more" if len(items) > shown else "")


def closing_summary(rows: list[dict], ref_dir: Path, loc_dir: Path, tiers: list[str], md: Path,
                    not_run: list[str] = ()) -> list[str]:
    """What make replicate ends with, on one screen: the tiers (and the command of each tier not run,
    `not_run`: tiers_not_run), the counts, each table that differs and each claim whose verdict
    changed, named; the rest is in comparison.md."""
    t = [r for r in rows if r["kind"] == "table"]
    c = [r for r in rows if r["kind"] == "claim"]
    out = [f"your results: {loc_dir}/ beside the reference {ref_dir}/ (untouched)",
           f"tiers run: {', '.join(tiers)}" + (f" ({'; '.join(tier_hints(not_run))})" if not_run else ""),
           f"tables: {summary(t) or 'none'}"]
    different = [r for r in t if r["outcome"] == "different"]
    out += [f"  different: {r['name']}: {r['detail'][:300]}" for r in different[:SHOWN]]
    if len(different) > SHOWN:
        out.append(f"  different, also: {listed([r['name'] for r in different[SHOWN:]], SHOWN)}")
    by_reason: dict[str, list[str]] = {}
    for r in t:
        if r["outcome"] == "not regenerated":
            by_reason.setdefault(r["detail"], []).append(r["name"])
    out += [f"  not regenerated: {listed(names, 3)}: {reason}" for reason, names in by_reason.items()]
    if c:
        changed = [r for r in c if r.get("verdict") == "changed"]
        out.append(f"claims: {summary(c)}; verdict changed in {len(changed)}")
        out += [f"  {r['name']}: {r['reference']} (reference) -> {r['yours']} (yours)" for r in changed[:SHOWN]]
        if len(changed) > SHOWN:
            out.append(f"  changed, also: {', '.join(r['name'] for r in changed[SHOWN:])}")
    out.append(f"comparison, with both verdicts of every claim side by side: {md} (and comparison.csv)")
    return out


def write_outputs(loc_dir: Path, md_text: str, table: pd.DataFrame) -> None:
    """comparison.md and .csv, each written whole (a temp file renamed over it), never through a link."""
    md, csv = loc_dir / "comparison.md", loc_dir / "comparison.csv"
    for path in (md, csv):
        if path.is_symlink():
            raise CompareError(f"{path}: a symbolic link (to {path.readlink()}): not written through; "
                               "remove it and run again")
    try:
        atomic_write_text(md, md_text)
        atomic_write_text(csv, table.map(csv_cell).to_csv(index=False))
    except WriteError as e:
        raise CompareError(str(e)) from None


def folder_problem(d: Path) -> str | None:
    """Why `d` is not a results folder to read (None: it is one)."""
    try:
        mode = os.stat(d).st_mode
    except OSError as e:
        return "no such folder" if e.errno == errno.ENOENT else f"unreadable ({e.strerror or e}; expected a folder)"
    return None if stat.S_ISDIR(mode) else f"{_kind(mode)}, expected a results folder"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True, help="your results root (e.g. results-local)")
    p.add_argument("--reference", type=Path, default=ROOT / "results", help="the committed results root")
    p.add_argument("--scale", default="embedded")
    p.add_argument("--replications", type=Path, default=ROOT / "replications",
                   help="the papers' experiments.yaml (each figure's tier)")
    args = p.parse_args(argv)
    ref_dir, loc_dir = args.reference / args.scale, args.results / args.scale
    for d in (ref_dir, loc_dir):   # before resolve(), which raises on a symbolic link loop
        if problem := folder_problem(d):
            print(f"compare: {d}: {problem}", file=sys.stderr)
            return 2
    if ref_dir.resolve() == loc_dir.resolve():
        print(f"compare: {loc_dir} is the reference itself: nothing to compare (git diff shows what changed)")
        return 0
    try:   # everything read and judged before anything is written
        tier_of = tier_figures(args.scale, args.replications)
        tiers = tiers_run(loc_dir, tier_of)
        not_run = tiers_not_run(tiers, tier_of)
        rows = (compare_tables(ref_dir, loc_dir, tier_of, tuple(tiers))
                + compare_claims(ref_dir / "claims.csv", loc_dir / "claims.csv"))
        write_outputs(loc_dir, markdown(rows, args.reference, args.results, args.scale, tiers, not_run),
                      pd.DataFrame(rows))
    except CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    print("\n".join(closing_summary(rows, ref_dir, loc_dir, tiers, loc_dir / "comparison.md", not_run)
                    + [line for line in [restored_line(loc_dir)] if line]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
