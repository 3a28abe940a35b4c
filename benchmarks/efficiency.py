"""How close each embedded workload's update runs to what one core can do: model FLOPs per update
(counted by torch.utils.flop_counter.FlopCounterMode on one real update, not estimated), seconds per
update on one thread through codist's own loop and through a plain PyTorch loop on the same model,
data and optimizer, and the same thread's fp32 and bf16 GEMM peak measured in the same process.

    python benchmarks/efficiency.py [--only lm cifar ...] [--batches 8192 ...] [--precision fp32 bf16] [--out results/bench]

Rows: every distinct (workload section, batch per rank) that the embedded plan's tiers train
(workflows/experiments.load_plan with tier=EVERY_TIER: every tier's runs), plus
EXTRA_BATCHES (batches a tier is about to use, each with why). Each row runs in a fresh process (one
rank, one model, algorithm allreduce: the update every algorithm's rank does at least once; its
process group and allocator are its own), 1 thread.

A timing decides nothing unless the machine was quiet: each row records the 1-minute load average
before and after it, and a row whose load reached QUIET_LOAD (2 on this 2-core machine) is refused,
never written (benchlib.refuse_loaded). A run replaces the rows it measured (same workload section,
batch and precision) and keeps the others, so the table can be completed across quiet windows.

Writes results/bench/efficiency.csv. Where the time goes: benchmarks/efficiency_profile.py.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks import benchlib
from codist.runlog import cpu_model

ROOT = benchlib.ROOT
GEMM_N = 1024           # the peak's square GEMM: large enough that one core's BLAS is at its best
MIN_TIMED_S = 3.0       # each timed side runs at least this long and at least MIN_UPDATES updates
MIN_UPDATES = 10
WARMUP_UPDATES = 3      # first updates: allocator, lazy init, oneDNN primitive caches
# Batches about to be used that no committed plan trains yet, each with its reason; a workload the
# plan does not train at all is measured from its embedded preset (replications/presets/embedded/).
EXTRA_BATCHES = {
    "lm": {512: "issue 37's Anil sync arm: >= 4 x B_crit with the step-count fit's B_crit ~145 "
                "(replications/anil2018/pilots/critical_batch.csv)",
           1024: "issue 37's Anil sync arm: a candidate between the two estimates (4 x 256)",
           4096: "issue 37's Anil sync arm if the critical batch is near the gradient noise scale, ~1,000-1,400 "
                 "at the claims' losses (replications/anil2018/pilots/noise_scale.csv)",
           8192: "the cost of Anil's regime: issue 37's saturation pilot puts a doubling gain <= 1.1x near "
                 "8,192 -> 16,384 (replications/anil2018/pilots/critical_batch_37.csv; benchmarks/regime_cost.py)",
           16384: "the cost of Anil's regime (as 8,192): Fig. 2a's sync arm at the saturated batch"},
    "imagenet": {128: "the cost of Anil's Fig. 3 regime, from below: on the ImageNet stand-in doubling 32 -> 64 "
                      "still reaches batch 32's best 2.2-2.6x sooner (replications/anil2018/pilots/critical_batch.csv)"},
    "translation": {32: "the embedded preset (Sodhani fig5 and sec4 are not run at this scale yet: issue 37's pilots)"},
}
# Workload keys that change the data set's size or draw, not the cost of an update: rows differing only
# in them are one row (label_noise: which labels the generator flips, not the update's cost).
SIZE_KEYS = ("train_size", "val_size", "data_seed", "data_dir", "label_noise")
# Workload keys added after rows were measured, left out at their default (as in the run id:
# codist.config.IN_RUN_ID_UNLESS), so a committed row keeps its workload_config
ADDED_DEFAULTS = {k.split(".", 1)[1]: v for k, v in benchlib.config.IN_RUN_ID_UNLESS.items() if k.startswith("workload.")}


def plan_rows() -> list[dict]:
    """One row per distinct (workload section, batch per rank) the embedded plan trains in any
    tier, with the figures that train it; then EXTRA_BATCHES."""
    from workflows.experiments import EVERY_TIER, load_plan

    plan = load_plan(ROOT / "replications", "embedded", tier=EVERY_TIER)
    figures_of: dict[str, set] = {}
    for (paper, figure), fig in plan.figures.items():
        for ref in fig.runs:
            figures_of.setdefault(ref.run_id, set()).add(f"{paper}/{figure} ({plan.tier_of[(paper, figure)]})")
    rows: dict[str, dict] = {}
    for run_id, cfg in plan.configs.items():
        workload = {k: v for k, v in json.loads(json.dumps(benchlib.config.to_dict(cfg)["workload"])).items()
                    if k not in ADDED_DEFAULTS or v != ADDED_DEFAULTS[k]}
        shape = {k: v for k, v in workload.items() if k not in SIZE_KEYS}
        key = json.dumps([shape, cfg.train.batch_per_rank], sort_keys=True)
        row = rows.setdefault(key, {"workload": workload, "batch": cfg.train.batch_per_rank,
                                    "optimizer": json.loads(json.dumps(benchlib.config.to_dict(cfg)["optimizer"])),
                                    "used_by": set()})
        row["used_by"] |= figures_of.get(run_id, set())
    out = [{**r, "used_by": "; ".join(sorted(r["used_by"]))} for r in rows.values()]
    for name, batches in EXTRA_BATCHES.items():
        like = next((r for r in out if r["workload"]["name"] == name), None)
        if like is None:   # not in the plan: its embedded preset
            raw = benchlib.preset(name)
            like = {"workload": raw["workload"], "optimizer": raw["optimizer"]}
        out += [{**like, "batch": b, "used_by": why} for b, why in batches.items()
                if not any(r["workload"] == like["workload"] and r["batch"] == b for r in out)]
    return sorted(out, key=lambda r: (r["workload"]["name"], json.dumps(r["workload"], sort_keys=True), r["batch"]))


def describe(workload: dict) -> str:
    """A row's workload in a few words: its name and the keys that set the model and input size."""
    keys = ("arch", "width", "classes", "image_size", "embedded_image_size", "augment", "dataset")
    words = "".join(f" {k}={workload[k]}" for k in keys if k in workload)
    if workload.get("downsample", 1) != 1:   # named only where set: the rows measured before it keep their names
        words += f" downsample={workload['downsample']}"
    return workload["name"] + words


def gemm_peak(torch, dtype, n: int = GEMM_N, reps: int = 5, seconds: float = 0.3) -> float:
    """Best GFLOP/s of an n x n GEMM on this thread: `reps` timings of as many GEMMs as fill `seconds`."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b   # the first call: the kernel's selection, its packing buffers
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds / 3:
        a @ b
        k += 1
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(k * 3):
            a @ b
        best = max(best, 2 * n ** 3 * k * 3 / (time.perf_counter() - t0) / 1e9)
    return best


def lstm_flops(torch) -> dict:
    """FlopCounterMode formulas for the LSTM's fused oneDNN layer, which the counter has none for (it
    would count the LM's output layer alone): the layer's GEMMs, as the counter counts mm, 2 FLOPs a
    multiply-add: forward 2 x tokens x 4H x (I + H) (input and recurrent gates); backward twice that
    (the gradients of the inputs, the hidden state and the weights). Pointwise gate math is not
    counted, as for every other op."""
    def forward(x_shape, w_ih_shape, w_hh_shape, *args, **kwargs) -> int:
        tokens = x_shape[0] * x_shape[1]
        return 2 * tokens * w_ih_shape[0] * (w_ih_shape[1] + w_hh_shape[1])

    def backward(x_shape, w_ih_shape, w_hh_shape, *args, **kwargs) -> int:
        return 2 * forward(x_shape, w_ih_shape, w_hh_shape)

    aten = torch.ops.aten
    return {aten.mkldnn_rnn_layer: forward, aten.mkldnn_rnn_layer_backward: backward}


def timed(step, start: int) -> tuple[float, int]:
    """Seconds per update of `step(i)` from update `start` on, over at least MIN_TIMED_S and MIN_UPDATES."""
    t0, i = time.perf_counter(), start
    while i - start < MIN_UPDATES or time.perf_counter() - t0 < MIN_TIMED_S:
        step(i)
        i += 1
    return (time.perf_counter() - t0) / (i - start), i - start


STEPS = 10 ** 6   # a run's train.steps: never reached, the loop is run in blocks (no final evaluation)


def one_rank_env() -> None:
    """This process as a one-rank gloo world on the CPU, 1 thread (what a rank of the embedded tier is)."""
    from codist.launching.launch import free_port, op_build_env
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      OMP_NUM_THREADS="1", CODIST_THREADS_PER_RANK="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="",
                      **op_build_env(os.environ))


@contextlib.contextmanager
def one_rank_run(row: dict, precision: str):
    """A run of `row` set up in this process as a rank sets it up (train.set_up, train.resume), in a
    temporary directory; its process group destroyed after."""
    import torch
    import yaml

    from codist import config
    from codist.rank import train

    raw = {"name": "efficiency", "workload": row["workload"], "algorithm": {"name": "allreduce"},
           "optimizer": row["optimizer"], "schedule": {"name": "constant"},
           "train": {"steps": STEPS, "batch_per_rank": row["batch"], "eval_every": STEPS, "save_model": False,
                     "precision": precision, "compile": row.get("compile", False)},
           "launch": {"launcher": "fork", "device": "cpu", "threads_per_rank": 1,
                      "allocator": row.get("allocator", "system")}, "seed": 0}
    with tempfile.TemporaryDirectory(prefix="codist-efficiency-") as tmp:
        out = Path(tmp)
        cfg = config.validate(raw, "efficiency")
        (out / "config.yaml").write_text(yaml.safe_dump(config.to_dict(cfg)))
        run = train.set_up(train.parse_args(["--config", str(out / "config.yaml"), "--out", str(out)]))
        try:
            train.resume(run)
            yield run
        finally:
            run.heartbeat.finish()   # its thread writes into the directory: stopped before the directory goes
            torch.distributed.destroy_process_group()


def loop_step(run):
    """`step(i)`: update i through codist's own loop (train.train_loop: batch, algorithm, timers, heartbeat)."""
    from codist.rank import train

    def step(i: int) -> None:
        code = train.train_loop(run, until=i + 1)
        assert code is None, f"codist's loop stopped with code {code}"
        run.start = i + 1
    return step


def measure(row: dict, precision: str) -> dict:
    """One row, in this process (the child): set up a one-rank run as a rank does, count one update's
    FLOPs, time codist's loop and a plain loop, and the GEMM peaks."""
    one_rank_env()
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    torch.set_num_threads(1)
    peaks = {"fp32": gemm_peak(torch, torch.float32), "bf16": gemm_peak(torch, torch.bfloat16)}
    with one_rank_run(row, precision) as run:
        cfg = run.cfg
        algo, workload = run.algo, run.workload
        for i in range(WARMUP_UPDATES):
            algo.train_step(i, run.stream.batch(i))
        # one real update through the algorithm: forward, loss, backward, optimizer step
        with FlopCounterMode(display=False, custom_mapping=lstm_flops(torch)) as counter:
            algo.train_step(WARMUP_UPDATES, run.stream.batch(WARMUP_UPDATES))
        flops = counter.get_total_flops()
        run.start = WARMUP_UPDATES + 1

        codist_s, codist_n = timed(loop_step(run), run.start)
        got = {"flops_per_update": flops, "codist_s_per_update": codist_s, "codist_updates_timed": codist_n,
               "gemm_fp32_gflops": peaks["fp32"], "gemm_bf16_gflops": peaks["bf16"],
               "torch": torch.__version__, "threads": torch.get_num_threads(),
               "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        if row.get("plain", True):   # lm_levers.py times codist's loop only
            got.update(plain_loop(torch, workload, cfg, precision))
    return got


def plain_loop(torch, workload, cfg, precision: str) -> dict:
    """The plain loop: the same workload's model, optimizer and batches, no harness, timed."""
    from codist.runtime import precision as precision_mod
    from codist.runtime.optim import build_optimizer, build_scheduler

    torch.manual_seed(1009)
    model = workload.build_model()
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    sched = build_scheduler(opt, cfg.schedule, STEPS)
    stream = workload.train_stream("same", 0, 1, cfg.train.batch_per_rank, 1, 0, cfg.seed)
    cast = precision_mod.autocast(precision, torch.device("cpu"))

    def plain_step(i: int) -> None:
        x, y = stream.batch(i)
        with cast:
            outputs = workload.forward(model, x)
        loss = workload.loss(outputs.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        loss.item()

    for i in range(WARMUP_UPDATES):
        plain_step(i)
    plain_s, plain_n = timed(plain_step, WARMUP_UPDATES)
    return {"parameters": sum(p.numel() for p in model.parameters()), "plain_s_per_update": plain_s,
            "plain_updates_timed": plain_n}


def measure_child(row: dict, precision: str) -> dict:
    """`measure(row, precision)` in a fresh process (its own allocator, caches and process group)."""
    child = subprocess.run([sys.executable, "-m", "benchmarks.efficiency", "--child", json.dumps(row), precision],
                           cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    if child.returncode != 0:
        raise SystemExit(f"efficiency: {describe(row['workload'])} batch {row['batch']} failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def run_row(row: dict, precision: str) -> dict:
    """`row` measured in a fresh process, with the load average before and after it."""
    before = benchlib.loadavg()
    got = measure_child(row, precision)
    gflops = lambda s: got["flops_per_update"] / s / 1e9   # noqa: E731
    return {
        "workload": row["workload"]["name"], "model": describe(row["workload"]), "batch": row["batch"],
        "precision": precision, "parameters": got["parameters"], "flops_per_update": got["flops_per_update"],
        "codist_s_per_update": got["codist_s_per_update"], "codist_gflops": gflops(got["codist_s_per_update"]),
        "plain_s_per_update": got["plain_s_per_update"], "plain_gflops": gflops(got["plain_s_per_update"]),
        "gemm_fp32_gflops": got["gemm_fp32_gflops"], "gemm_bf16_gflops": got["gemm_bf16_gflops"],
        "ratio_to_fp32_peak": gflops(got["codist_s_per_update"]) / got["gemm_fp32_gflops"],
        "ratio_to_bf16_peak": gflops(got["codist_s_per_update"]) / got["gemm_bf16_gflops"],
        "harness_overhead": got["codist_s_per_update"] / got["plain_s_per_update"] - 1,
        "updates_timed": got["codist_updates_timed"], "threads": got["threads"],
        "loadavg_before": before, "loadavg": max(before, benchlib.loadavg()),
        "cpu": cpu_model(), "torch": got["torch"], "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "used_by": row["used_by"],
        "workload_config": json.dumps(row["workload"], sort_keys=True),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", help="workload names to measure (others' rows are kept)")
    p.add_argument("--batches", nargs="+", type=int, help="these batches per rank only (others' rows are kept)")
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    p.add_argument("--out", default=str(ROOT / "results" / "bench"))
    p.add_argument("--child", nargs=2, metavar=("ROW", "PRECISION"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(json.loads(args.child[0]), args.child[1])))
        return 0
    rows = [r for r in plan_rows() if (not args.only or r["workload"]["name"] in args.only)
            and (not args.batches or r["batch"] in args.batches)]
    measured, refused = [], []
    for row in rows:
        for precision in args.precision:
            got = run_row(row, precision)
            print(f"{got['model']} batch {got['batch']} {precision}: {got['codist_s_per_update']:.4f} s/update, "
                  f"{got['codist_gflops']:.1f} GFLOP/s = {got['ratio_to_fp32_peak']:.0%} of fp32 peak "
                  f"{got['gemm_fp32_gflops']:.0f} (load {got['loadavg']})", flush=True)
            kept, why = benchlib.refuse_loaded([got])
            measured += kept
            refused += why
    table = benchlib.replace_rows(Path(args.out) / "efficiency.csv", pd.DataFrame(measured),
                                  ["workload", "batch", "precision", "workload_config"])
    if len(table):
        benchlib.write_csv(table.sort_values(["workload", "model", "batch", "precision"]), args.out, "efficiency.csv")
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
