"""Two cores, one sync run: 2 ranks x 1 thread (each half the batch, a gloo all-reduce per update) against
1 rank x 2 threads (the whole batch, intra-op threads), at the batches the paper tier uses (issue 38).

    python benchmarks/ranks_vs_threads.py [--steps 60] [--repeats 3] [--out results/bench]

Each run goes through codist's real launcher (benchlib.run: `codist.launching.launch.run`, the fork
launcher), allreduce, the same global batch; the two arrangements alternate (ABAB...) so a drift in
the machine's speed falls on both. Seconds per update = the run's summary `wall_s` (training time,
evaluation and set-up excluded) / steps. Median over repeats; the load average before and after each
run is recorded, and a row whose load reached benchlib.QUIET_LOAD is refused, never written.
Writes results/bench/ranks_vs_threads.csv.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks import benchlib
from codist.runlog import cpu_model

# (workload preset, global batch, why): the paper tier's sync batches
CASES = [("lm", 512, "issue 37's Anil sync arm past the critical batch"),
         ("lm", 32, "the LM's default-tier batch"),
         ("cifar", 64, "the embedded cifar preset (ResNet-8 width 16) at a two-worker global batch, 2 x 32")]
ARRANGEMENTS = {"2 ranks x 1 thread": (2, 1), "1 rank x 2 threads": (1, 2)}


def config(preset: str, batch: int, ranks: int, threads: int, steps: int) -> dict:
    return benchlib.merge(benchlib.preset(preset), {
        "name": f"ranks-vs-threads-{preset}", "parallel": {"world_size": ranks, "models": 1},
        "train": {"steps": steps, "batch_per_rank": batch // ranks, "eval_every": 10 ** 6, "save_model": False},
        "launch": {"launcher": "fork", "device": "cpu", "threads_per_rank": threads}})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=str(benchlib.ROOT / "results" / "bench"))
    args = p.parse_args(argv)
    rows = []
    for preset, batch, why in CASES:
        seconds: dict[str, list[float]] = {name: [] for name in ARRANGEMENTS}
        load = benchlib.loadavg()
        for _ in range(args.repeats):
            for name, (ranks, threads) in ARRANGEMENTS.items():
                summary, _ = benchlib.run(config(preset, batch, ranks, threads, args.steps), f"{preset} {name}")
                seconds[name].append(summary["wall_s"] / summary["steps"])
                load = max(load, benchlib.loadavg())
        two_ranks, one_rank = (statistics.median(seconds[n]) for n in ARRANGEMENTS)
        rows.append({"workload": preset, "model": f"{preset} global batch {batch}", "batch": batch, "why": why,
                     "s_per_update_2_ranks_1_thread": two_ranks, "s_per_update_1_rank_2_threads": one_rank,
                     "ratio_1_rank_over_2_ranks": one_rank / two_ranks, "steps": args.steps,
                     "repeats": args.repeats, "loadavg": load, "cpu": cpu_model(),
                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        print(rows[-1], flush=True)
    return benchlib.write_quiet(rows, args.out, "ranks_vs_threads.csv")


if __name__ == "__main__":
    sys.exit(main())
