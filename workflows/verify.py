"""Reproducibility proof: regenerate the replication from nothing and compare it with what is
committed.

    python workflows/verify.py [--scale embedded] [--cores N] [--tier T] [--keep DIR] [TARGET ...]

Runs Snakemake (the local profile, as `make replicate`) into a fresh temporary results folder
(`--config results=<tmp>`: nothing committed is read or touched), then compares every table
(`*.csv`) under results/<scale>/ with the regenerated one: same files, same rows, and in every
column of results the same values, exactly. The machine's measurements (columns named by their
unit, codist.runlog.machine_column: seconds `_s` (wall_s, setup_s, eval_s, elapsed_s, wall_s_to_target,
...), rates `_per_s`, megabytes `_mb`, utilisation `mfu`) differ between machines and runs, so they are
left out; so are the PNGs (drawn from these tables) and notebooks (they check themselves against
claims.csv when they run). TARGETs (paths relative to results/<scale>/, e.g.
`sun2016/cifar10.csv`) limit the check to those outputs and what they need; without them, the
whole default replication is regenerated (as long as `make replicate`). `--tier T` (one of
analysis/schema.py TIERS) regenerates that tier's figures too; the tables and claim rows
of the tiers not regenerated are left out of the check.

Prints each difference (file, column, first differing rows) and, for a table that differs, whether
the seeds explain it (workflows/compare.py: within seed noise or different), and exits 1 if any
table is not bit-identical.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from analysis import sequential
from analysis.schema import BUILDS_ON, TIERS
from workflows.compare import UNTESTED, exact_differences, judge_table, of_figures, tables, tier_figures

ROOT = Path(__file__).resolve().parents[1]


def default_tier_rows(df: pd.DataFrame, tier: str = "default") -> pd.DataFrame:
    """A claims table with only the claims of the default tier, of `tier` and of the tiers it builds on
    (schema.BUILDS_ON: regenerated with it): without the other tiers' (tested by their tier, or 'not
    tested in this tier' in this one)."""
    if "tier" not in df:
        return df
    others = [t for t in TIERS if t not in ("default", tier, *BUILDS_ON.get(tier, ()))]
    other = df["tier"].isin(others) | df["verdict"].astype(str).str.startswith(UNTESTED)
    return df[~other].reset_index(drop=True)


def regenerate(scale: str, results: Path, cores: int, targets: list[str], tier: str = "default") -> None:
    exe = Path(sys.executable).parent / "snakemake"
    # targets before --config, which takes every key=value that follows it
    cmd = [str(exe), *(str(results / scale / t) for t in targets), "--profile", "env/profiles/local",
           "--cores", str(cores), "--config", f"results={results}", f"scale={scale}", f"tier={tier}"]
    def one_pass() -> int:
        print("$", " ".join(cmd), flush=True)
        return subprocess.run(cmd, cwd=ROOT).returncode

    try:   # as make replicate-sequential: again while a sequential claim asks for its next look's seeds
        sequential.repeat(one_pass, results / scale)
    except sequential.SequentialError as e:
        raise SystemExit(f"verify: the regeneration failed: {e} (see Snakemake's output above)") from None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("targets", nargs="*", help="outputs relative to results/<scale>/ (default: everything)")
    p.add_argument("--scale", default="embedded")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    p.add_argument("--tier", default="default", choices=TIERS,
                   help="another tier (analysis/schema.py TIERS): its figures too (a table of that tier needs it)")
    p.add_argument("--keep", type=Path, default=None, help="regenerate into this (new, empty) folder and keep it")
    args = p.parse_args()
    committed = ROOT / "results" / args.scale
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="codist-verify-"))
    if tmp.exists() and any(tmp.iterdir()):
        raise SystemExit(f"verify: {tmp} is not empty: the regeneration must start from nothing")
    try:
        regenerate(args.scale, tmp.resolve(), args.cores, args.targets, args.tier)
        fresh = tmp / args.scale
        made = tables(fresh)
        wanted = tables(committed) if not args.targets else made
        # another tier's committed tables are checked with --tier <that tier>
        others = {pf for pf, tier in tier_figures(args.scale).items() if tier != args.tier}
        wanted = {rel for rel in wanted if not of_figures(rel, others)}
        problems = {}
        for rel in sorted(made | wanted):
            if not (fresh / rel).exists():
                problems[rel] = ["committed, but the regeneration did not write it"]
            elif not (committed / rel).exists():
                problems[rel] = ["regenerated, but not committed"]
            else:
                ref, new = pd.read_csv(committed / rel), pd.read_csv(fresh / rel)
                if rel.name == "claims.csv":
                    ref, new = default_tier_rows(ref, args.tier), default_tier_rows(new, args.tier)
                problems[rel] = exact_differences(ref, new)
                if problems[rel]:   # not bit-identical: could the seeds explain it? (workflows/compare.py)
                    outcome, why = judge_table(ref, new, each_row=rel.name == "claims.csv")
                    problems[rel].append(f"{outcome}" + (f": {'; '.join(why[:3])}" if why else ""))
        bad = {k: v for k, v in problems.items() if v}
        for rel, lines in bad.items():
            print(f"results/{args.scale}/{rel}:")
            for line in lines:
                print(f"  {line}")
        print(f"verify: {len(problems)} table(s) compared, {len(bad)} differ (the machine's measurements left out)")
        return 1 if bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
