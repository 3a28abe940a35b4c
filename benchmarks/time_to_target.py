"""Time to target: for each embedded workload and algorithm, the updates, samples and training
wall time until the workload's target metric is first reached, over a few seeds.

    python benchmarks/time_to_target.py [--workloads cifar lm ctr] [--seeds 0 1]
        [--steps lm=600] [--eval-every cifar=50] [--out results/bench]

Why: the papers' claims are about reaching a quality sooner (Anil: 2-way codistillation reaches
the baseline's loss in ~2x fewer steps; Sun: EC-DNN reaches MA-DNN's accuracy 1.26-1.36x
faster), so the final metric alone does not test them. The target is the workload's own
(`summary.json` `target`: cifar val_accuracy 0.675, lm val_loss = Bayes optimum + 25% of the
gap to the unigram entropy, ctr val_log_loss 0.4525), never chosen here.

Each run is the workload's embedded preset (replications/presets/embedded/<workload>.yaml:
model, data, optimizer, schedule, per-rank batch, 1 thread per rank) with only the algorithm
and the parallel layout changed:

  allreduce x1           1 rank (the preset itself)
  allreduce x2           2 ranks, same per-rank batch (a 2x larger global batch)
  codistill 2x1          2 models x 1 rank, checkpoint exchange every 50 updates (Anil's k),
                         no burn-in, alpha 1, T 1; data: lm `disjoint` (fresh, different streams:
                         Anil), cifar/ctr `shuffled` (each model the whole finite set in its own
                         order: Sodhani)
  model_average K=2      MA-DNN, 2 workers x 1 rank, tau 16 (Sun), disjoint data (Sun)
  ensemble_compress K=2  EC-DNN, 2 workers x 1 rank, tau = the preset's eval_every (10 rounds per
                         run; Sun's 4k of 64k CIFAR-10 steps is 16), disjoint data (Sun)

So the comparison basis is Anil's: every model gets the baseline's per-rank batch and the
2-rank algorithms use 2x the hardware of `allreduce x1`. The models compared are "0" (the
headline: codist's first model) and, for MA-DNN and EC-DNN, also "G" (the averaged / ensembled
global model). A run that never reaches the target within its steps counts as not reached
(steps_to_target empty), not as its last step.

Resolution: the target is checked at evaluations only, so `--eval-every` sets the granularity
(defaults finer than the presets': cifar 50, lm 50, ctr 350; evaluation time is excluded from
`wall_s`, so a finer cadence does not change the wall times). `wall_s_to_target` is the
`wall_s` of that metrics row: training time on rank 0, communication included, evaluation and
launch excluded. `--steps` truncates a workload's run: only sound for constant learning-rate
schedules (lm, ctr), where a shorter run follows the same trajectory; cifar's cosine schedule
depends on the total, so it always runs the preset's 1250 steps.

Writes results/bench/time_to_target.csv (per workload, algorithm and model: seeds run, seeds
that reached the target, median / min / max of steps, samples and wall time to target, median
step time and final metric) and results/bench/time_to_target_runs.csv (one row per run and
model, with each run's training bytes per category and link tier, which
benchmarks/projected_walltime.py reads).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import pandas as pd

from benchmarks import benchlib

TRAINING_CATEGORIES = ("grad_allreduce", "param_exchange", "prediction_exchange", "model_average")

#: codistillation's data split per workload (see the module docstring)
CODISTILL_DATA = {"lm": "disjoint", "cifar": "shuffled", "ctr": "shuffled"}

ALGORITHMS = {
    "allreduce x1": lambda w, p: {"parallel": {"world_size": 1, "models": 1}, "algorithm": {"name": "allreduce"}},
    "allreduce x2": lambda w, p: {"parallel": {"world_size": 2, "models": 1}, "algorithm": {"name": "allreduce"}},
    "codistill 2x1": lambda w, p: {"parallel": {"world_size": 2, "models": 2},
                                   "algorithm": {"name": "codistill", "exchange_every": 50, "burn_in": 0,
                                                 "alpha": 1.0, "temperature": 1.0, "data": CODISTILL_DATA[w]}},
    "model_average K=2": lambda w, p: {"parallel": {"world_size": 2, "models": 2},
                                       "algorithm": {"name": "model_average", "tau": 16, "data": "disjoint"}},
    "ensemble_compress K=2": lambda w, p: {"parallel": {"world_size": 2, "models": 2},
                                           "algorithm": {"name": "ensemble_compress",
                                                         "tau": p["train"]["eval_every"], "data": "disjoint"}},
}
EVAL_EVERY = {"cifar": 50, "lm": 50, "ctr": 350}
TRUNCATABLE = ("constant",)   # schedules whose trajectory does not depend on train.steps


def parse_pairs(items: list[str], what: str) -> dict[str, int]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{what}: {item!r} is not WORKLOAD=N")
        out[name] = int(value)
    return out


def reached(rows: list[dict], model: str, metric: str, target: float, higher: bool) -> dict | None:
    """The first metrics row of `model` whose metric meets the target, or None."""
    for row in sorted((r for r in rows if r["model"] == model), key=lambda r: r["step"]):
        v = row.get(metric)
        if v is not None and (v >= target if higher else v <= target):
            return row
    return None


def comm_columns(summary: dict) -> dict:
    """Training bytes of the whole job per category and tier, and calls (for the projection)."""
    out = {}
    by = summary["comm"]["by_category"]
    for cat in TRAINING_CATEGORIES:
        c = by.get(cat, {})
        out[f"{cat}_within_sent_bytes_all_ranks"] = c.get("within_group_sent_bytes", 0)
        out[f"{cat}_between_sent_bytes_all_ranks"] = c.get("between_group_sent_bytes", 0)
        out[f"{cat}_calls_all_ranks"] = c.get("calls_all_ranks", 0)
    out["training_sent_bytes_per_rank_per_update"] = summary["comm"]["training_sent_bytes_per_rank_per_update"]
    out["between_group_sent_bytes_per_rank_per_update"] = summary["comm"]["between_group_sent_bytes_per_rank_per_update"]
    return out


def one_run(workload: str, algo: str, seed: int, steps: int | None, eval_every: int) -> list[dict]:
    base = benchlib.preset(workload)
    over = ALGORITHMS[algo](workload, base)
    train = {"eval_every": eval_every, "save_model": False}
    if steps is not None:
        if base["schedule"]["name"] not in TRUNCATABLE:
            raise SystemExit(f"--steps {workload}={steps}: the preset's {base['schedule']['name']!r} schedule "
                             f"depends on train.steps, so a truncated run is not the preset's trajectory")
        train["steps"] = steps
    raw = benchlib.merge(base, over, {"name": f"ttt-{workload}-{algo.split()[0]}-s{seed}", "seed": seed,
                                      "train": train, "launch": {"threads_per_rank": 1}})
    load = benchlib.loadavg()
    t0 = time.time()
    s, rows = benchlib.run(raw, f"time_to_target {workload} {algo} seed {seed}")
    elapsed = time.time() - t0
    metric, target, higher = s["metric"], s["target"], s["higher_is_better"]
    if target is None:
        raise SystemExit(f"{workload}: the workload has no target metric")
    out = []
    for model in [m for m in ("0", "G") if m in s["models"]]:
        hit = reached(rows, model, metric, target, higher)
        out.append({
            "workload": workload, "algorithm": algo, "seed": seed, "model": model,
            "world_size": s["world_size"], "models": raw["parallel"]["models"],
            "batch_per_rank": raw["train"]["batch_per_rank"], "eval_every": eval_every,
            "period": raw["algorithm"].get("exchange_every") or raw["algorithm"].get("tau"),
            "metric": metric, "target": target, "higher_is_better": higher,
            "steps_to_target": hit["step"] if hit else None,
            "samples_per_model_to_target": hit["samples"] if hit else None,
            "wall_s_to_target": hit["wall_s"] if hit else None,
            "final_metric": s["models"][model]["final"][metric],
            "best_metric": s["models"][model]["best"][metric],
            "steps": s["steps"], "wall_s": s["wall_s"], "step_ms": 1000 * s["wall_s"] / s["steps"],
            "eval_s": s["eval_s"], "setup_s": s["setup_s"], "elapsed_s": s["elapsed_s"],
            "launcher_elapsed_s": round(elapsed, 3), "loadavg_before": load, "loadavg_after": benchlib.loadavg(),
            **comm_columns(s),
        })
    print({k: out[0][k] for k in ("workload", "algorithm", "seed", "steps_to_target", "wall_s_to_target",
                                  "final_metric", "step_ms", "loadavg_before")}, flush=True)
    return out


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (w, a, m), g in runs.groupby(["workload", "algorithm", "model"], sort=False):
        hit = g.dropna(subset=["steps_to_target"])

        def stat(col, fn):
            return fn(hit[col]) if len(hit) else None
        rows.append({
            "workload": w, "algorithm": a, "model": m, "metric": g.metric.iloc[0], "target": g.target.iloc[0],
            "seeds": len(g), "reached": len(hit),
            "steps_to_target_median": stat("steps_to_target", statistics.median),
            "steps_to_target_min": stat("steps_to_target", min),
            "steps_to_target_max": stat("steps_to_target", max),
            "samples_per_model_to_target_median": stat("samples_per_model_to_target", statistics.median),
            "wall_s_to_target_median": stat("wall_s_to_target", statistics.median),
            "wall_s_to_target_min": stat("wall_s_to_target", min),
            "wall_s_to_target_max": stat("wall_s_to_target", max),
            "step_ms_median": statistics.median(g.step_ms),
            "final_metric_median": statistics.median(g.final_metric),
            "steps_run": int(g.steps.iloc[0]), "world_size": int(g.world_size.iloc[0]),
            "batch_per_rank": int(g.batch_per_rank.iloc[0]), "eval_every": int(g.eval_every.iloc[0]),
            "loadavg_median": statistics.median(g.loadavg_before),
        })
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=["cifar", "lm", "ctr"], choices=[q.stem for q in sorted(benchlib.PRESETS.glob("*.yaml"))])
    p.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--steps", nargs="*", default=[], help="WORKLOAD=N: truncate (constant schedules only)")
    p.add_argument("--eval-every", nargs="*", default=[], help="WORKLOAD=N (defaults: cifar 50, lm 50, ctr 350)")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    steps = parse_pairs(args.steps, "--steps")
    eval_every = {**EVAL_EVERY, **parse_pairs(args.eval_every, "--eval-every")}
    t0 = time.time()
    rows = []
    for workload in args.workloads:
        for seed in args.seeds:            # seeds outermost per workload: a partial run still covers every algorithm
            for algo in args.algorithms:
                rows += one_run(workload, algo, seed, steps.get(workload),
                                eval_every.get(workload, benchlib.preset(workload)["train"]["eval_every"]))
                benchlib.write_csv(pd.DataFrame(rows), args.out, "time_to_target_runs.csv")
    runs = pd.DataFrame(rows)
    table = aggregate(runs)
    benchlib.write_csv(table, args.out, "time_to_target.csv")
    print(table.drop(columns=["metric", "eval_every", "batch_per_rank"]).to_markdown(index=False, floatfmt=".4g"))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
