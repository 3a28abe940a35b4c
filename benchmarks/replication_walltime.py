"""Where the default replication's wall time goes: launch overhead, training, evaluation, the
workflow itself and the analysis jobs.

    python benchmarks/replication_walltime.py [--cores 2] [--results DIR] [--out results/bench]

Runs the default replication (`snakemake -c2`, the venv's Snakemake, every figure at the
embedded scale) into a fresh results folder (`--config results=<tmp>`; the committed
results/ are never touched), in two timed phases so that training and analysis are
separated by Snakemake itself rather than by reading logs:
  1. `snakemake -c2 --config results=<tmp> --until train`: every run's config and the runs;
  2. `snakemake -c2 --config results=<tmp>`: what is left: the figure manifests, aggregation
     and plots (the analysis).
Before them, `snakemake -n` on the same empty folder times Snakemake's own start-up (parsing
the workflow, which imports codist.config, and building the job graph). A single
`snakemake -c2` pays it once, the two phases twice, so the total reported is
phase 1 + phase 2 - one start-up, and the analysis part is phase 2 - one start-up.

Each run's summary.json splits its own time: `setup_s` (launch to first update: launcher,
imports, process groups, data, engine), `wall_s` (training updates), `eval_s` (evaluation),
and the rest of `elapsed_s` (the per-update bookkeeping outside wall_s and the end of the
run). Workflow overhead = phase 1 - the sum of the runs' `elapsed_s` (Snakemake start-up, the
config rules, process start before launch and teardown after the summary). The runs must not
overlap for that subtraction to mean anything (`-c2` and each run's declared threads make
them sequential here); the script checks it from each summary's write time and elapsed_s and
reports the overlap.

Writes results/bench/replication_walltime.csv (one row per part, seconds and share of the
total) and results/bench/replication_walltime_runs.csv (one row per run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

import benchlib


def snakemake(args: list[str], cores: int, results: Path, log: Path) -> float:
    """Run the venv's snakemake in the repository; return its wall time; fail loudly."""
    exe = Path(sys.executable).parent / "snakemake"
    cmd = [str(exe), f"-c{cores}", "--config", f"results={results}", *args]
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, cwd=benchlib.ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    took = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}); see {log}")
    return took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--results", default=None, help="fresh results folder (default: a temporary one, removed after)")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    tmp = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="codist-replication-"))
    if tmp.exists() and any(tmp.iterdir()):
        raise SystemExit(f"{tmp} is not empty: the replication must start from nothing")
    tmp.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.gettempdir()) / f"replication_walltime_{os.getpid()}.log"
    load = benchlib.loadavg()
    t0 = time.perf_counter()
    startup = snakemake(["-n", "--quiet"], args.cores, tmp, log)
    train = snakemake(["--until", "train"], args.cores, tmp, log)
    analysis = snakemake([], args.cores, tmp, log)
    total = time.perf_counter() - t0

    runs = []
    for s_path in sorted((tmp / "embedded" / "runs").glob("*/summary.json")):
        s = json.loads(s_path.read_text())
        m = json.loads((s_path.parent / "manifest.json").read_text())
        end = s_path.stat().st_mtime
        runs.append({"run_id": s["run_id"], "name": s["name"], "world_size": s["world_size"],
                     "threads_per_rank": m["threads_per_rank"], "steps": s["steps"], "setup_s": s["setup_s"],
                     "wall_s": s["wall_s"], "eval_s": s["eval_s"], "elapsed_s": s["elapsed_s"],
                     "tail_s": s["elapsed_s"] - s["setup_s"] - s["wall_s"] - s["eval_s"],
                     "start_unix": end - s["elapsed_s"], "end_unix": end})
    if not runs:
        raise SystemExit(f"no run summaries under {tmp}/embedded/runs")
    rd = pd.DataFrame(runs).sort_values("start_unix")
    overlap = sum(max(0.0, a - b) for a, b in zip(rd.end_unix.iloc[:-1], rd.start_unix.iloc[1:]))
    sums = {k: float(rd[k].sum()) for k in ("setup_s", "wall_s", "eval_s", "tail_s", "elapsed_s")}
    parts = [
        ("launch overhead (sum of setup_s)", sums["setup_s"], "launcher, imports, process groups, data, engine"),
        ("training (sum of wall_s)", sums["wall_s"], "the updates, communication included"),
        ("evaluation (sum of eval_s)", sums["eval_s"], "periodic evaluations"),
        ("run tail (elapsed_s - setup - wall - eval)", sums["tail_s"],
         "between-update stop flag / heartbeat / progress bar, final model save and summary"),
        ("workflow overhead in phase 1 (phase 1 - sum of elapsed_s)", train - sums["elapsed_s"],
         "Snakemake start-up and scheduling, config rules, process start and teardown around each run"),
        ("analysis (phase 2 - one Snakemake start-up)", analysis - startup,
         "figure manifests, aggregate, plot"),
    ]
    # one `snakemake -c2` pays one start-up; phase 2 paid a second one, taken out above
    single = train + analysis - startup
    rows = [{"part": name, "seconds": round(sec, 2), "share_of_total": round(sec / single, 4), "note": note}
            for name, sec, note in parts]
    rows.append({"part": "total: one snakemake -c2 (phase 1 + phase 2 - one start-up)", "seconds": round(single, 2),
                 "share_of_total": 1.0,
                 "note": f"{len(runs)} runs, snakemake -c{args.cores}; runs overlapped for {overlap:.1f} s; "
                         f"load average at start {load}; measured wall of the benchmark {total:.1f} s"})
    rows.append({"part": "Snakemake start-up (dry run on the empty folder; inside the workflow overhead)",
                 "seconds": round(startup, 2), "share_of_total": round(startup / single, 4),
                 "note": "parse the workflow (imports codist.config) and build the job graph; not added to the total"})
    table = pd.DataFrame(rows)
    benchlib.write_csv(table, args.out, "replication_walltime.csv")
    benchlib.write_csv(rd.drop(columns=["start_unix", "end_unix"]), args.out, "replication_walltime_runs.csv")
    print(rd.drop(columns=["start_unix", "end_unix"]).to_markdown(index=False, floatfmt=".2f"))
    print(table.to_markdown(index=False, floatfmt=".2f"))
    print(f"phase 1 {train:.1f} s, phase 2 {analysis:.1f} s; snakemake log: {log}")
    if not args.results:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
