"""Harness overhead per update, in one process: codist's own training loop (`codist.rank.train`'s
`train_loop`, on a run set up by `train.set_up` as a rank does, one-rank gloo world) against a
plain PyTorch loop on the same data, model, batch, optimizer and schedule, alternating in blocks.

    python benchmarks/loop_overhead.py [--block 10] [--blocks 400] [--out results/bench]

Why in one process: on this machine the speed of identical runs in separate processes spreads by
+-25% (results/bench/one_rank/harness_overhead_raw.csv: the same 1-rank run at 1,520-2,440
images/s), far more than the 3% this measures; blocks of updates alternating within one process
see the same machine, in ABBA order (codist first in even blocks, plain first in odd ones) so a
drift within a pair cancels; the speed still changes within seconds, so blocks are short (10
updates, ~0.3 s) and many. The headline is total codist time / total plain time - 1 over the block
pairs (the first dropped: warm-up), with a bootstrap 95% interval over pairs; the median of the
per-pair ratios is reported beside it.

What codist's side includes: everything `train_loop` does per update (batch fetch, forward through
the algorithm, loss, the update mechanics (one rank: `updates.LocalUpdate`), timers, the heartbeat,
the progress bar, the 4-byte stop-flag all-reduce every 10 updates); not set-up or evaluation
(benchmarks/startup.py and harness_overhead.py measure the whole run). The plain loop: forward,
loss, zero_grad, backward, SGD step, LR step and loss.item(), as harness_overhead.py's.

Model and data: the embedded cifar preset (ResNet-8 width 16, 16x16 images, SGD momentum 0.9,
weight decay, cosine schedule), 64 images per update, 1 thread.

Writes results/bench/loop_overhead.csv (the summary) and loop_overhead_raw.csv (every block);
with `--mechanics engine` (the one-rank update through a DeepSpeed engine, as before
updates.LocalUpdate) loop_overhead_engine.csv and its _raw.csv.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks import benchlib
from codist.launching.launch import free_port


UPDATE = {"local": "LocalUpdate", "engine": "a DeepSpeed engine"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block", type=int, default=10, help="updates per block (10: one stop-flag all-reduce each)")
    p.add_argument("--blocks", type=int, default=400, help="block pairs (codist, plain)")
    p.add_argument("--mechanics", choices=["local", "engine"], default="local",
                   help="codist's update at one rank: its own (updates.LocalUpdate), or a DeepSpeed engine as "
                        "before it (updates.EngineUpdate), to see what the engine costs")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      OMP_NUM_THREADS="1", CODIST_THREADS_PER_RANK="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    import torch

    from codist import config
    from codist.rank import train
    from codist.runtime.data import BatchStream
    from codist.runtime.optim import build_optimizer, build_scheduler

    steps = args.block * args.blocks
    raw = benchlib.merge(benchlib.preset("cifar"), {"name": "loop-overhead", "train": {
        "steps": steps + 1, "eval_every": 10**6, "save_model": False}})   # + 1: no final evaluation inside
    with tempfile.TemporaryDirectory(prefix="codist-loop-") as tmp:
        out = Path(tmp)
        cfg = config.validate(raw, "loop_overhead")
        (out / "config.yaml").write_text(yaml.safe_dump(config.to_dict(cfg)))
        run = train.set_up(train.parse_args(["--config", str(out / "config.yaml"), "--out", str(out)]))
        train.resume(run)
        if args.mechanics == "engine":   # the same run stepping through a DeepSpeed engine
            from codist.algorithms.updates import EngineUpdate
            algo = run.algo
            algo.update = EngineUpdate(cfg, run.topo, algo.model)
            algo.model, algo.optimizer, algo.scheduler = algo.update.model, algo.update.optimizer, algo.update.scheduler
        # the plain loop: its own model, optimizer and schedule, the same batches
        workload = run.workload
        torch.manual_seed(cfg.seed * 1009)
        model = workload.build_model()
        opt = build_optimizer(model.parameters(), cfg.optimizer)
        sched = build_scheduler(opt, cfg.schedule, steps)
        stream = BatchStream(workload.train_dataset(), cfg.train.batch_per_rank, 1, 0, cfg.seed)

        def plain_block(start: int) -> None:
            for step in range(start, start + args.block):
                x, y = stream.batch(step)
                loss = workload.loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                loss.item()

        def codist_block(start: int) -> None:
            code = train.train_loop(run, until=start + args.block)
            assert code is None, f"codist's loop stopped with code {code}"
            run.start = start + args.block

        rows = []
        for block in range(args.blocks):
            start = block * args.block
            order = (codist_block, plain_block) if block % 2 == 0 else (plain_block, codist_block)   # ABBA: drift cancels
            took = {}
            for side in order:
                t0 = time.perf_counter()
                side(start)
                took[side] = time.perf_counter() - t0
            rows.append({"block": block, "updates": args.block, "codist_first": block % 2 == 0,
                         "codist_s": took[codist_block], "plain_s": took[plain_block],
                         "overhead": took[codist_block] / took[plain_block] - 1, "loadavg": benchlib.loadavg()})
            print(rows[-1], flush=True)
        torch.distributed.destroy_process_group()
    raw_df = pd.DataFrame(rows)
    name = "loop_overhead" if args.mechanics == "local" else "loop_overhead_engine"
    benchlib.write_csv(raw_df, args.out, f"{name}_raw.csv")
    kept = raw_df[raw_df.block > 0]   # block 0: warm-up (first iterations, allocator)
    total = kept.codist_s.sum() / kept.plain_s.sum() - 1
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(kept), (2000, len(kept)))   # bootstrap over block pairs
    boot = kept.codist_s.to_numpy()[picks].sum(1) / kept.plain_s.to_numpy()[picks].sum(1) - 1
    low, high = np.quantile(boot, [0.025, 0.975])
    table = pd.DataFrame([{
        "workload": "cifar embedded preset: resnet8 w16, 16x16 images, 64 per update, 1 thread",
        "comparison": f"codist train_loop (1 rank, {UPDATE[args.mechanics]}) vs a plain PyTorch loop, ABBA blocks "
                      f"in one process: total codist time / total plain time - 1",
        "overhead": total, "ci95_low": low, "ci95_high": high, "method": "bootstrap over block pairs (2,000)",
        "overhead_median_of_pairs": kept.overhead.median(), "block_pairs": len(kept),
        "updates_per_block": args.block, "target": 0.03, "meets_target": bool(total <= 0.03),
        "codist_updates_per_s": len(kept) * args.block / kept.codist_s.sum(),
        "plain_updates_per_s": len(kept) * args.block / kept.plain_s.sum(),
    }])
    benchlib.write_csv(table, args.out, f"{name}.csv")
    print(table.T.to_string())


if __name__ == "__main__":
    sys.exit(main())
