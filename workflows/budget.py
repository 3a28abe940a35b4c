"""GPU-hour budget of the full scale, per figure and per paper:

    python workflows/budget.py [--gpu a100] [--csv results/bench/full_scale_budget.csv] [--readme docs/full-scale.md]

(`make budget` writes both). Reads the plan the Snakefile builds for `--config scale=full`
(workflows/experiments.py) and prices its runs with codist.budget (throughput tables, hours per
run, the table: how, in its docstring). `--readme` rewrites the section between the budget
markers of that file; `--csv` writes the table. The command lives here, not in codist, because
codist never imports the checkout's workflows/.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codist import budget
from codist.budget import BudgetError
from workflows.experiments import Plan, load_plan

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python workflows/budget.py"


def load_full_plan(replications: str | Path) -> Plan:
    """The Snakefile's plan at scale=full."""
    return load_plan(replications, "full")


def priced_plan(replications: str | Path, throughput: str | Path,
                measured: str | Path) -> tuple[Plan, budget.Throughput, list[str]]:
    """(the full plan, its throughput table with the registered workloads' and the measured rates,
    the GPU kinds measured). The plan first: loading it imports CODIST_PLUGINS, whose workloads
    add_registered then finds."""
    table = budget.load_throughput(throughput)
    plan = load_full_plan(replications)   # validates the configs: CODIST_PLUGINS imported
    budget.add_registered(table)
    return plan, table, budget.add_measured(table, measured)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    p.add_argument("--gpu", default="a100", help="GPU kind of the throughput table (default a100)")
    p.add_argument("--replications", default=str(ROOT / "replications"))
    p.add_argument("--throughput", default=str(ROOT / "replications" / "throughput.yaml"))
    p.add_argument("--measured", default=str(ROOT / "results" / "bench" / "gpu_throughput.csv"),
                   help="make gpu-check's CSV: its cuda rows are measured rates of their GPU kind")
    p.add_argument("--csv", help="write the table here (e.g. results/bench/full_scale_budget.csv)")
    p.add_argument("--readme", help="rewrite the budget section of this README")
    args = p.parse_args(argv)
    try:
        plan, table, measured = priced_plan(args.replications, args.throughput, args.measured)
        known = sorted({g for _, g, _ in table.rates})
        if args.gpu not in known:
            raise BudgetError(f"--gpu {args.gpu!r}: no throughput for it; known: {', '.join(known)}")
        rows = budget.plan_budget(plan, table, args.gpu)
    except BudgetError as e:
        print(f"codist budget: {e}", file=sys.stderr)
        return 2
    command = COMMAND + ("" if args.gpu == "a100" else f" --gpu {args.gpu}")
    text = budget.markdown(rows, table, args.gpu, command, measured)
    print(text, end="")
    if args.csv:
        budget.write_csv(rows, args.csv, args.gpu)
    if args.readme:
        budget.update_readme(args.readme, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
