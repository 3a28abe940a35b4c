"""Where an update's time goes, for the rows of results/bench/efficiency.csv furthest from the fp32 GEMM
peak: torch.profiler over codist's own loop (one rank, 1 thread, as efficiency.py sets it up).

    python benchmarks/efficiency_profile.py [--workloads 2] [--only lm:512 cifar:32 ...] [--updates 200]
        [--out results/bench]

Which rows: the fp32 row furthest from the peak of each of the `--workloads` workloads furthest from it
(one row a workload), or the rows `--only` names (workload:batch; of several such rows, the one
furthest from the peak). A run replaces the breakdowns of the rows it profiles and keeps the others.

Per row, one line per part of the update, in ms per update and as a share of its wall time:
- the harness's own calls, each wrapped in a profiler range here: the batch (`stream.batch`), the
  algorithm's update (`algorithm.train_step`), and the rest of train_loop (timers, loss sums,
  heartbeat, progress: the wall time outside both);
- inside the update, the aten ops with the most self CPU time (the kernels), each named;
- the update's time in no aten op at all: Python, the optimizer's and the modules' own Python, the
  dispatcher (the update's wall time less every op's self time).
Writes results/bench/efficiency_profile.csv; the load average is recorded beside it (and a row at load
>= benchlib.QUIET_LOAD is refused, as in efficiency.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks import benchlib, efficiency

TOP_OPS = 8


def profile(row: dict, updates: int) -> list[dict]:
    """The breakdown of `updates` updates of `row` (this process: a one-rank run)."""
    efficiency.one_rank_env()
    import torch
    from torch.profiler import ProfilerActivity, record_function

    torch.set_num_threads(1)
    with efficiency.one_rank_run(row, "fp32") as run:
        step = efficiency.loop_step(run)
        for i in range(efficiency.WARMUP_UPDATES):
            step(i)
        batch, train_step = run.stream.batch, run.algo.train_step

        def traced_batch(i):
            with record_function("harness: stream.batch"):
                return batch(i)

        def traced_step(i, b):
            with record_function("harness: algorithm.train_step"):
                return train_step(i, b)

        run.stream.batch, run.algo.train_step = traced_batch, traced_step
        first = run.start
        with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for i in range(first, first + updates):
                step(i)
            wall = time.perf_counter() - t0
    events = prof.key_averages()
    ranges = {e.key: e.cpu_time_total / 1e6 for e in events if e.key.startswith("harness: ")}
    ops = sorted((e for e in events if e.key.startswith("aten::")), key=lambda e: -e.self_cpu_time_total)
    in_ops = sum(e.self_cpu_time_total for e in ops) / 1e6
    per = lambda s: s / updates * 1e3   # noqa: E731  ms per update
    name = f"{efficiency.describe(row['workload'])} batch {row['batch']}"
    lines = [("update (wall)", wall), ("harness: stream.batch", ranges.get("harness: stream.batch", 0.0)),
             ("harness: algorithm.train_step", ranges.get("harness: algorithm.train_step", 0.0)),
             ("harness: rest of train_loop", wall - sum(ranges.values()))]
    lines += [(f"op: {e.key}", e.self_cpu_time_total / 1e6) for e in ops[:TOP_OPS]]
    lines += [(f"op: {len(ops) - TOP_OPS} other aten ops", sum(e.self_cpu_time_total for e in ops[TOP_OPS:]) / 1e6),
              ("no aten op (Python, dispatcher, modules' and optimizer's own code)", wall - in_ops)]
    return [{"row": name, "part": part, "ms_per_update": per(s), "share_of_wall": s / wall, "updates": updates}
            for part, s in lines]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", type=int, default=2, help="how many workloads, furthest from the fp32 peak first")
    p.add_argument("--only", nargs="+", metavar="WORKLOAD:BATCH", help="profile these rows instead")
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--out", default=str(efficiency.ROOT / "results" / "bench"))
    p.add_argument("--child", nargs=2, metavar=("ROW", "UPDATES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(profile(json.loads(args.child[0]), int(args.child[1]))))
        return 0
    import subprocess
    table = pd.read_csv(Path(args.out) / "efficiency.csv")
    table = table[table.precision == "fp32"].sort_values("ratio_to_fp32_peak")
    if args.only:
        wanted = [tuple(x.split(":")) for x in args.only]
        table = table[[(w, str(b)) in wanted for w, b in zip(table.workload, table.batch)]]
        table = table.drop_duplicates(["workload", "batch"])
    else:
        table = table.drop_duplicates("workload").head(args.workloads)
    plan = {(r["workload"]["name"], json.dumps(r["workload"], sort_keys=True), r["batch"]): r
            for r in efficiency.plan_rows()}
    out, refused = [], []
    for _, t in table.iterrows():
        row = plan[(t.workload, t.workload_config, t.batch)]
        before = benchlib.loadavg()
        child = subprocess.run([sys.executable, "-m", "benchmarks.efficiency_profile", "--child", json.dumps(row),
                                str(args.updates)], cwd=efficiency.ROOT, capture_output=True, text=True,
                               env={**efficiency.os.environ, "PYTHONPATH": str(efficiency.ROOT)})
        if child.returncode != 0:
            raise SystemExit(f"efficiency_profile: {t.model} batch {t.batch} failed:\n{child.stderr[-3000:]}")
        lines = json.loads(child.stdout.strip().splitlines()[-1])
        load = max(before, benchlib.loadavg())
        kept, why = benchlib.refuse_loaded([{"model": t.model, "batch": t.batch, "loadavg": load}])
        refused += why
        if kept:
            out += [{**line, "ratio_to_fp32_peak": t.ratio_to_fp32_peak, "loadavg": load,
                     "cpu": t.cpu, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())} for line in lines]
    if out:
        new = pd.DataFrame(out)
        path = Path(args.out) / "efficiency_profile.csv"
        if path.exists():   # the breakdowns of rows not profiled now are kept
            old = pd.read_csv(path)
            new = pd.concat([old[~old.row.isin(set(new.row))], new], ignore_index=True)
        benchlib.write_csv(new, args.out, "efficiency_profile.csv")
        print(pd.DataFrame(out)[["row", "part", "ms_per_update", "share_of_wall"]].to_string(index=False))
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
