"""Redraw every figure, _paper and claims table from the tables under <results>/<scale>/, without training:

    python workflows/figures.py [--results results] [--cores N] [--directory DIR]     (make figures)

Runs Snakemake's `figures` target (Snakefile: every figure and claims table of `all`, and the
frontier's figures) allowing, and forcing, only the rules that draw from tables (REDRAW_RULES), so
the per-run tables (<figure>.csv, _curves.csv, .md) and the table figures' _values.csv are sources
and no run is planned; the _paper tables are redrawn from _values.csv (rule paper_table_redraw), and so
are the dose-response decisions (rule dose_response).
The scripts are the workflow's own (analysis/plot_*.py, paper_table.py, dose_response.py, claims.py,
frontier_plot.py).
--directory: Snakemake's working directory (the results root is relative to it), e.g. a copy of the
repository's results elsewhere.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the rules that read tables, never runs
REDRAW_RULES = ("figures", "figure_runs", "aggregate_redraw", "paper_table_redraw", "dose_response", "plot", "claims", "claims_all",
                "claims_summary", "frontier_runs", "frontier_plot", "frontier")


def command(results: str, cores: int, directory: Path | None = None) -> list[str]:
    exe = Path(sys.executable).parent / "snakemake"
    where = ["--directory", str(directory)] if directory else []
    return [str(exe), "figures", "-s", str(ROOT / "Snakefile"), *where, "--profile", str(ROOT / "env/profiles/local"),
            "--cores", str(cores), "--allowed-rules", *REDRAW_RULES, "--forcerun", *REDRAW_RULES,
            "--config", f"results={results}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results", help="the results root whose tables are redrawn (default results)")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    p.add_argument("--directory", type=Path, default=None, help="Snakemake's working directory (default: here)")
    args = p.parse_args(argv)
    cmd = command(args.results, args.cores, args.directory)
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
