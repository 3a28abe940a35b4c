"""The per-rank entry point: `python -m codist.train --config RUN/config.yaml --out RUN`.

Started on every rank by the DeepSpeed launcher (or torchrun), which sets RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT and passes --local_rank. The loop knows the
algorithm and the workload only through their interfaces.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from . import config as config_mod
from .algorithms import TrainContext, build_algorithm
from .comm import CommMeter, summarize
from .data import BatchStream, eval_batches
from .distributed import init, pick_device
from .runlog import MetricsLog, atomic_torch_save, atomic_write_json, git_state, hardware, package_versions
from .workloads import build_workload


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="codist.train", description=__doc__)
    p.add_argument("--config", required=True, help="resolved run config (YAML)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help="set by the launcher")
    return p.parse_args(argv)


class Evaluator:
    """Sharded evaluation of every model, one world all-reduce of the sums (category eval)."""

    def __init__(self, ctx: TrainContext, algo):
        self.ctx, self.algo = ctx, algo
        self.names = algo.eval_names()
        self.val = ctx.workload.val_dataset()

    @torch.no_grad()
    def __call__(self, train_loss_sum: float, train_loss_count: int) -> dict[str, dict[str, float]]:
        ctx, topo = self.ctx, self.ctx.topo
        keys, rows = None, {}
        for name, model in self.algo.eval_models().items():
            was_training = model.training
            model.eval()
            sums: dict[str, float] = {}
            for x, y in eval_batches(self.val, topo.ranks_per_model, topo.dp_rank, ctx.cfg.train.eval_batch):
                out = model(x.to(ctx.device))
                for k, v in ctx.workload.eval_sums(out, y.to(ctx.device)).items():
                    sums[k] = sums.get(k, 0.0) + v
            model.train(was_training)
            rows[name] = sums
            keys = list(sums)
        if keys is None:  # every rank holds a model and a non-empty shard (checked in config)
            raise RuntimeError(f"rank {topo.rank}: the algorithm gave this rank no model to evaluate")
        cols = keys + ["train_loss_sum", "train_loss_count", "comm_sent_bytes"]
        table = torch.zeros(len(self.names), len(cols), dtype=torch.float64)
        mine = str(topo.model_index)
        for name, sums in rows.items():
            i = self.names.index(name)
            table[i, :len(keys)] = torch.tensor([sums.get(k, 0.0) for k in keys], dtype=torch.float64)
        if mine in self.names:  # training statistics belong to this rank's own model
            i = self.names.index(mine)
            table[i, len(keys):] = torch.tensor([train_loss_sum, train_loss_count, ctx.meter.sent_bytes()],
                                                dtype=torch.float64)
        ctx.meter.all_reduce(table, category="eval")
        out = {}
        for i, name in enumerate(self.names):
            vals = dict(zip(cols, table[i].tolist()))
            metrics = ctx.workload.finalize_eval({k: vals[k] for k in keys})
            n = vals["train_loss_count"]
            metrics["train_loss"] = vals["train_loss_sum"] / n if n else None
            metrics["comm_bytes"] = int(vals["comm_sent_bytes"])
            out[name] = metrics
        return out


def write_manifest(cfg, out: Path, topo, threads: int, device) -> None:
    atomic_write_json(out / "manifest.json", {
        "run_id": cfg.run_id(),
        "name": cfg.name,
        "seed": cfg.seed,
        "config": config_mod.to_dict(cfg),
        "git": git_state(),
        "packages": package_versions(),
        "hardware": hardware(),
        "world_size": topo.world_size,
        "models": topo.models,
        "ranks_per_model": topo.ranks_per_model,
        "threads_per_rank": threads,
        "device": str(device),
        "backend": torch.distributed.get_backend(),
        "launcher": os.environ.get("CODIST_LAUNCHER", "unknown"),
        "command": sys.argv,
        "started_unix": time.time(),
    })


def main(argv=None) -> int:
    args = parse_args(argv)
    t_process = time.time()
    out = Path(args.out)
    cfg = config_mod.load(args.config)
    threads = int(os.environ.get("CODIST_THREADS_PER_RANK") or os.environ.get("OMP_NUM_THREADS") or 1)
    torch.set_num_threads(threads)
    device, backend = pick_device(cfg.launch.device)
    topo = init(cfg.parallel.models, backend)
    meter = CommMeter(topo.rank, topo.model_of())
    meter.install_deepspeed_hooks()
    lead = topo.rank == 0

    workload = build_workload(cfg.workload, cfg.seed)
    ctx = TrainContext(cfg, topo, meter, workload, device)
    algo = build_algorithm(ctx)
    algo.setup()
    train_set, data_seed = algo.train_data(workload.train_dataset())
    stream = BatchStream(train_set, cfg.train.batch_per_rank, topo.ranks_per_model, topo.dp_rank, data_seed)
    evaluate = Evaluator(ctx, algo)
    log = MetricsLog(out / "metrics.jsonl")
    if lead:
        for stale in ("metrics.jsonl", "summary.json"):
            (out / stale).unlink(missing_ok=True)
        write_manifest(cfg, out, topo, threads, device)

    launched = float(os.environ.get("CODIST_LAUNCH_UNIX", t_process))
    steps, per_model_batch = cfg.train.steps, cfg.train.batch_per_rank * topo.ranks_per_model
    history: dict[str, list[dict]] = {}
    train_s = eval_s = 0.0
    loss_sum, loss_n = 0.0, 0
    bar = None
    if lead:
        from tqdm import tqdm
        bar = tqdm(total=steps, desc=cfg.name or cfg.run_id(), unit="step", file=sys.stderr,
                   dynamic_ncols=True, mininterval=1.0)
    first_step_unix = None
    for step in range(steps):
        t0 = time.perf_counter()
        if first_step_unix is None:
            first_step_unix = time.time()
        loss = algo.train_step(step, stream.batch(step))
        train_s += time.perf_counter() - t0
        loss_sum, loss_n = loss_sum + loss, loss_n + 1
        done = step + 1
        if done % cfg.train.eval_every == 0 or done == steps:
            t1 = time.perf_counter()
            results = evaluate(loss_sum, loss_n)
            eval_s += time.perf_counter() - t1
            loss_sum, loss_n = 0.0, 0
            for name, metrics in results.items():
                row = {"step": done, "samples": done * per_model_batch, "wall_s": round(train_s, 4),
                       "model": name, **metrics}
                history.setdefault(name, []).append(row)
                if lead:
                    log.append(row)
            if bar is not None:
                first = results[evaluate.names[0]]
                bar.set_postfix({workload.metric.name: f"{first[workload.metric.name]:.4f}"}, refresh=False)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()

    if cfg.train.save_model and topo.dp_rank == 0:  # one copy per model, from its group's first rank
        for name, model in algo.eval_models().items():
            atomic_torch_save(model.state_dict(), out / f"model_{name}.pt")

    totals = meter.as_tensor()
    meter.all_reduce(totals, category="control")
    if lead:
        atomic_write_json(out / "summary.json", summary(cfg, workload, history, totals, topo, steps,
                                                        per_model_batch, train_s, eval_s,
                                                        setup_s=first_step_unix - launched,
                                                        elapsed_s=time.time() - launched))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


def summary(cfg, workload, history, totals, topo, steps, per_model_batch, train_s, eval_s, setup_s, elapsed_s):
    metric = workload.metric
    pick = max if metric.higher_is_better else min
    per_model = {}
    for name, rows in history.items():
        best = pick(rows, key=lambda r: r[metric.name])
        per_model[name] = {"final": rows[-1], "best": {"step": best["step"], metric.name: best[metric.name]}}
    headline = per_model[next(iter(history))]
    return {
        "run_id": cfg.run_id(),
        "name": cfg.name,
        "workload": cfg.workload.name,
        "algorithm": cfg.algorithm.name,
        "metric": metric.name,
        "higher_is_better": metric.higher_is_better,
        "target": metric.target,
        "final_metric": headline["final"][metric.name],
        "best_metric": headline["best"][metric.name],
        "steps": steps,
        "samples": steps * per_model_batch,
        "world_size": topo.world_size,
        "wall_s": round(train_s, 4),
        "eval_s": round(eval_s, 4),
        "setup_s": round(setup_s, 4),
        "elapsed_s": round(elapsed_s, 4),
        "models": per_model,
        "comm": summarize(totals, topo.world_size, steps),
    }


if __name__ == "__main__":
    sys.exit(main())
