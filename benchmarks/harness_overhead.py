"""Harness overhead: codist's training throughput against a plain PyTorch loop.

Same model, data, batch, optimizer and threads; one rank (the plain loop has no ranks).
The harness number is samples / wall_s from summary.json (training time on rank 0,
evaluation excluded); the plain loop times the same number of steps, nothing else.
Also reports the run's fixed overhead (launch to first step, `setup_s`).

    python benchmarks/harness_overhead.py [--steps 300] [--repeats 3] [--out results/bench]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from codist import config, launch
from codist.data import BatchStream
from codist.optim import build_optimizer
from codist.workloads import build_workload

BASE = {
    "name": "bench",
    "workload": {"name": "cifar"},
    "parallel": {"world_size": 1},
    "train": {"batch_per_rank": 32, "eval_every": 10**6, "save_model": False},
    "launch": {"launcher": "deepspeed"},
}


def plain_loop(cfg, threads: int) -> float:
    """Samples per second of a hand-written loop: forward, loss, backward, SGD step."""
    torch.set_num_threads(threads)
    workload = build_workload(cfg.workload, cfg.seed)
    torch.manual_seed(cfg.seed)
    model = workload.build_model()
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    stream = BatchStream(workload.train_dataset(), cfg.train.batch_per_rank, 1, 0, cfg.seed)
    t0 = time.perf_counter()
    for step in range(cfg.train.steps):
        x, y = stream.batch(step)
        loss = workload.loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return cfg.train.steps * cfg.train.batch_per_rank / (time.perf_counter() - t0)


def harness(cfg) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        if launch.run(cfg, Path(tmp) / "run") != 0:
            raise SystemExit("codist run failed")
        s = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    return s["samples"] / s["wall_s"], s["setup_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    raw = config.apply_overrides(BASE, [f"train.steps={args.steps}"])
    cfg = config.validate(raw, "benchmarks/harness_overhead.py")
    threads = launch.threads_per_rank(cfg)
    rows = []
    for r in range(args.repeats):
        plain = plain_loop(cfg, threads)
        ours, setup = harness(cfg)
        rows.append({"repeat": r, "threads": threads, "batch": cfg.train.batch_per_rank, "steps": args.steps,
                     "plain_samples_per_s": plain, "codist_samples_per_s": ours, "codist_setup_s": setup})
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    med = {k: statistics.median(df[k]) for k in ("plain_samples_per_s", "codist_samples_per_s", "codist_setup_s")}
    med["overhead"] = med["plain_samples_per_s"] / med["codist_samples_per_s"] - 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "harness_overhead_raw.csv", index=False)
    pd.DataFrame([{"workload": "cifar embedded resnet8 w16", "threads": threads, **med}]).to_csv(
        out / "harness_overhead.csv", index=False)
    print(json.dumps(med, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
