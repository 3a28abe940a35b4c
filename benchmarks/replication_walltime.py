"""Where the default replication's wall time goes: run start-up, training, evaluation, the
workflow itself and the analysis jobs.

    python benchmarks/replication_walltime.py [--cores N] [--results DIR] [--out results/bench]

Runs the default replication (the venv's Snakemake with `make replicate`'s settings: the local
profile and --cores N, default the machine's cores; every figure at the embedded scale) into a
fresh results folder (`--config results=<tmp>`; the committed results/ are never touched) with
one timed `snakemake` call. Training and analysis interleave (a figure is drawn as soon as its
runs are done), so the split is: phase 1 = start to the last run's summary.json, phase 2 (the
analysis left after it) = the rest. (A separate `--until train` phase trips Snakemake's issue
#823 on the teacher -> student edge of two-phase distillation.) `snakemake -n` on the same empty
folder times Snakemake's own start-up (inside phase 1). As on a fresh machine, the runs get a
private, empty data cache (`CODIST_CACHE_DIR`: each embedded data set is generated once, by its
first run) and a private warm-server folder (`XDG_RUNTIME_DIR`: the first run starts the server).

`--summarize DIR --wall-s S` splits a replication that already ran into DIR (e.g. `make
replicate`, timed with /usr/bin/time) without running it again: phase 1 then is S less the
analysis time given by `--analysis-s`.

Runs overlap (several jobs on the cores), so phase 1 is split in core-seconds: each run holds
its Snakemake threads (ranks x threads per rank, capped at --cores as train.smk caps them: a
4-rank run on 2 cores holds 2) for its `elapsed_s`, split by its summary into
`setup_s` (launch to first update: `codist run`'s own process start, imports, launcher,
process groups, data, engine), `wall_s` (training updates), `eval_s` (evaluation) and the rest
(per-update bookkeeping, final model and summary). What the runs do not account for of phase
1's wall x cores is workflow overhead and idle cores (Snakemake scheduling, config rules,
process start and teardown around each run, cores left idle by the schedule). Each part's
share is of the whole replication's core-seconds (total wall x cores).

Writes results/bench/replication_walltime.csv (one row per part) and
results/bench/replication_walltime_runs.csv (one row per run).
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

from benchmarks import benchlib
from codist.launching.warm_client import stop_servers


def snakemake(args: list[str], cores: int, results: Path, log: Path) -> float:
    """Run the venv's snakemake in the repository; return its wall time; fail loudly."""
    exe = Path(sys.executable).parent / "snakemake"
    cmd = [str(exe), "--profile", "env/profiles/local", "--cores", str(cores), "--config", f"results={results}", *args]
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, cwd=benchlib.ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    took = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}); see {log}")
    return took


def run_table(results: Path, cores: int) -> pd.DataFrame:
    """One row per run: its summary's time split and the cores it held (Snakemake threads)."""
    runs = []
    for s_path in sorted((results / "embedded" / "runs").glob("*/summary.json")):
        s = json.loads(s_path.read_text())
        m = json.loads((s_path.parent / "manifest.json").read_text())
        runs.append({"run_id": s["run_id"], "name": s["name"], "world_size": s["world_size"],
                     "threads_per_rank": m["threads_per_rank"], "launcher": m["launcher"], "steps": s["steps"],
                     "cores": min(s["world_size"] * m["threads_per_rank"], cores), "setup_s": s["setup_s"],
                     "wall_s": s["wall_s"], "eval_s": s["eval_s"], "elapsed_s": s["elapsed_s"],
                     "tail_s": s["elapsed_s"] - s["setup_s"] - s["wall_s"] - s["eval_s"]})
    if not runs:
        raise SystemExit(f"no run summaries under {results}/embedded/runs")
    return pd.DataFrame(runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    p.add_argument("--results", default=None, help="results root without an embedded/ folder (default: a temporary "
                   "one, removed after); `--results results` is `make replicate`, timed")
    p.add_argument("--summarize", default=None, help="a results root whose replication already ran: split it only")
    p.add_argument("--wall-s", type=float, default=None, help="with --summarize: its measured wall time")
    p.add_argument("--analysis-s", type=float, default=0.0, help="with --summarize: its analysis time after the runs")
    p.add_argument("--note", default="", help="with --summarize: how the wall time was measured")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    load = benchlib.loadavg()
    if args.summarize:
        if args.wall_s is None:
            raise SystemExit("--summarize needs --wall-s (the replication's measured wall time)")
        tmp, startup, measured = Path(args.summarize), 0.0, args.wall_s
        train, analysis, log = args.wall_s - args.analysis_s, args.analysis_s, "(not run here)"
    else:
        tmp = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="codist-replication-"))
        if (tmp / "embedded").exists():   # `--results results` (without results/embedded) regenerates the committed results
            raise SystemExit(f"{tmp / 'embedded'} exists: the replication must start from nothing")
        tmp.mkdir(parents=True, exist_ok=True)
        log = Path(tempfile.gettempdir()) / f"replication_walltime_{os.getpid()}.log"
        fresh = Path(tempfile.mkdtemp(prefix="codist-replication-machine-"))
        for var, sub in (("CODIST_CACHE_DIR", "cache"), ("XDG_RUNTIME_DIR", "runtime")):
            (fresh / sub).mkdir(mode=0o700)
            os.environ[var] = str(fresh / sub)   # inherited by snakemake and every codist run
        startup = snakemake(["-n", "--quiet"], args.cores, tmp, log)
        t_start = time.time()
        try:
            measured = snakemake([], args.cores, tmp, log)
        finally:
            stop_servers(fresh / "runtime")
            shutil.rmtree(fresh, ignore_errors=True)
        last_run = max(p.stat().st_mtime for p in (tmp / "embedded" / "runs").glob("*/summary.json"))
        train, analysis = last_run - t_start, measured - (last_run - t_start)

    rd = run_table(tmp, args.cores)
    table = split(rd, train, analysis, args.cores, startup if not args.summarize else None,
                  f"{len(rd)} runs; load average at the end {load}; {args.note or 'timed by this script'}")
    benchlib.write_csv(table, args.out, "replication_walltime.csv")
    benchlib.write_csv(rd, args.out, "replication_walltime_runs.csv")
    print(table.to_markdown(index=False, floatfmt=".2f"))
    print(f"phase 1 {train:.1f} s, phase 2 {analysis:.1f} s; snakemake log: {log}")
    if not args.results and not args.summarize:
        shutil.rmtree(tmp, ignore_errors=True)


def split(rd: pd.DataFrame, train: float, analysis: float, cores: int, startup: float | None,
          total_note: str) -> pd.DataFrame:
    """The replication's core-seconds by part (phase 1 = `train` s, phase 2 = `analysis` s)."""
    held = {k: float((rd[k] * rd.cores).sum()) for k in ("setup_s", "wall_s", "eval_s", "tail_s", "elapsed_s")}
    single = train + analysis
    budget = single * cores          # the replication's core-seconds
    parts = [
        ("run start-up (setup_s x cores held)", held["setup_s"], float(rd.setup_s.sum()),
         f"codist run's process start to the first update; median {rd.setup_s.median():.2f} s per run"),
        ("training (wall_s x cores held)", held["wall_s"], float(rd.wall_s.sum()), "the updates, communication included"),
        ("evaluation (eval_s x cores held)", held["eval_s"], float(rd.eval_s.sum()), "periodic evaluations"),
        ("run tail (rest of elapsed_s x cores held)", held["tail_s"], float(rd.tail_s.sum()),
         "between-update stop flag / heartbeat / progress bar, final model save and summary"),
        ("workflow overhead and idle cores in phase 1", train * cores - held["elapsed_s"], None,
         "Snakemake scheduling, config rules, process start and teardown around each run, idle cores"),
        ("analysis after the last run (all cores)", analysis * cores, analysis,
         "figure manifests, aggregate, plots, claims, notebooks (those drawn earlier count in phase 1)"),
    ]
    rows = [{"part": name, "core_seconds": round(cs, 1), "share_of_total": round(cs / budget, 4),
             "seconds": None if sec is None else round(sec, 1), "note": note} for name, cs, sec, note in parts]
    rows.append({"part": f"total: one snakemake --cores {cores}",
                 "core_seconds": round(budget, 1), "share_of_total": 1.0, "seconds": round(single, 1),
                 "note": total_note})
    if startup is not None:
        rows.append({"part": "Snakemake start-up (dry run on the empty folder; inside the workflow overhead)",
                     "core_seconds": None, "share_of_total": None, "seconds": round(startup, 1),
                     "note": "parse the workflow and build the job graph; not added to the total"})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
