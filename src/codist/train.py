"""The per-rank entry point: `python -m codist.train --config RUN/config.yaml --out RUN`.

Started on every rank by the DeepSpeed launcher (or torchrun), which sets RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT and passes --local_rank. The loop knows the
algorithm and the workload only through their interfaces.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch

from . import checkpoint
from . import config as config_mod
from .algorithms import TrainContext, build_algorithm
from .comm import CommMeter, summarize
from .data import eval_batches, to_device
from .distributed import init, pick_device
from .owner import owner_gone
from .progress import Progress
from .runlog import Heartbeat, MetricsLog, atomic_torch_save, atomic_write_json, git_state, hardware, package_versions
from .workloads import build_workload


EXIT_PREEMPTED = 3   # checkpointed on SIGTERM/SIGUSR1: not done, rerun to resume
STOP_CHECK_EVERY = 10   # updates between the ranks' agreement on a stop signal (one tiny all-reduce)
EXIT_DIVERGED = 4    # the training loss became NaN or inf: stopped, no summary.json and no models written


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
        self.init_params = algo.initial_parameters()

    @torch.no_grad()
    def init_distance(self) -> float:
        """L2 distance of this rank's model from its initialisation (Sodhani et al. 2020, Fig. 1)."""
        now = list(self.algo.model.parameters())
        return float(sum(((p - p0.to(p.device)) ** 2).sum() for p, p0 in zip(now, self.init_params)) ** 0.5)

    @torch.no_grad()
    def __call__(self, train_loss_sum: float, train_loss_count: int, distill_sum: float = 0.0,
                 distill_count: int = 0) -> dict[str, dict[str, float]]:
        ctx, topo = self.ctx, self.ctx.topo
        keys, rows = None, {}
        for name, model in self.algo.eval_models().items():
            was_training = model.training
            model.eval()
            sums: dict[str, float] = {}
            for batch in eval_batches(self.val, topo.ranks_per_model, topo.dp_rank, ctx.cfg.train.eval_batch):
                x, y = to_device(batch, ctx.device)
                for k, v in ctx.workload.eval_model_sums(model, x, y).items():
                    sums[k] = sums.get(k, 0.0) + v
            model.train(was_training)
            rows[name] = sums
            keys = list(sums)
        if keys is None:  # every algorithm gives each rank its own model to evaluate
            raise RuntimeError(f"rank {topo.rank}: the algorithm gave this rank no model to evaluate")
        cols = keys + ["train_loss_sum", "train_loss_count", "comm_sent_bytes", "init_distance", "distill_sum",
                       "distill_count"]
        table = torch.zeros(len(self.names), len(cols), dtype=torch.float64)
        mine = str(topo.model_index)
        for name, sums in rows.items():
            i = self.names.index(name)
            table[i, :len(keys)] = torch.tensor([sums.get(k, 0.0) for k in keys], dtype=torch.float64)
        if mine in self.names:  # training statistics belong to this rank's own model
            i = self.names.index(mine)
            own = self.init_distance() if topo.dp_rank == 0 else 0.0   # one rank per model adds it
            table[i, len(keys):] = torch.tensor([train_loss_sum, train_loss_count, ctx.meter.sent_bytes(), own,
                                                 distill_sum, distill_count], dtype=torch.float64)
        ctx.meter.all_reduce(table, category="eval")
        out = {}
        for i, name in enumerate(self.names):
            vals = dict(zip(cols, table[i].tolist()))
            metrics = ctx.workload.finalize_eval({k: vals[k] for k in keys})
            n = vals["train_loss_count"]
            metrics["train_loss"] = vals["train_loss_sum"] / n if n else None   # the task loss only
            dn = vals["distill_count"]   # the distillation / compression term, on the updates it acted
            metrics["distill_loss"] = vals["distill_sum"] / dn if dn else None
            metrics["comm_bytes"] = int(vals["comm_sent_bytes"])
            metrics["init_distance"] = vals["init_distance"] if n else None   # local models only
            out[name] = metrics
        return out


def write_manifest(cfg, out: Path, topo, threads: int, device, resumed_from: int | None) -> None:
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
        "resumed_from_step": resumed_from,
    })


class StopFlag:
    """SIGTERM / SIGUSR1 (SLURM preemption) ask the run to checkpoint and exit; so does the end
    of the `codist run` that started the ranks (codist.owner). The ranks agree on it with one
    tiny all-reduce every STOP_CHECK_EVERY updates, so they all stop after the same update."""

    def __init__(self):
        self.raised = 0
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self._handler)

    def _handler(self, signum, frame):
        self.raised = 1

    def agreed(self, meter) -> bool:
        if not self.raised and owner_gone():
            print("codist: the codist run that started this rank is gone; stopping", file=sys.stderr)
            self.raised = 1
        flag = torch.tensor([self.raised], dtype=torch.int32)
        meter.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, category="control")
        return bool(flag.item())


def main(argv=None) -> int:
    args = parse_args(argv)
    t_process = time.time()
    out = Path(args.out)
    cfg = config_mod.load(args.config)
    threads = int(os.environ.get("CODIST_THREADS_PER_RANK") or os.environ.get("OMP_NUM_THREADS") or 1)
    torch.set_num_threads(threads)
    device, backend = pick_device(cfg.launch.device)
    stop = StopFlag()
    topo = init(cfg.parallel.models, backend, timeout_s=cfg.launch.collective_timeout_s)
    heartbeat = Heartbeat(out, topo.rank)
    meter = CommMeter(topo.rank, topo.model_of())
    meter.install_hooks()
    lead = topo.rank == 0
    run_id = cfg.run_id()

    workload = build_workload(cfg.workload, cfg.seed)
    ctx = TrainContext(cfg, topo, meter, workload, device, out)
    algo = build_algorithm(ctx)
    algo.setup()
    stream = algo.train_stream()
    evaluate = Evaluator(ctx, algo)
    log = MetricsLog(out / "metrics.jsonl")

    steps, per_model_batch = cfg.train.steps, cfg.train.batch_per_rank * topo.ranks_per_model
    timers = {"train_s": 0.0, "eval_s": 0.0, "loss_sum": 0.0, "loss_n": 0}
    start = checkpoint.latest(out, run_id)   # also a stop signal's checkpoint when checkpoint_every is 0
    rows: list[dict] = []
    resume_load_s = None
    if start is not None:   # resume: state, RNG, counters, timers and metrics rows as they were at `start`
        t_load = time.perf_counter()
        group_state, rank_state = checkpoint.load(out, start, run_id, topo.rank, topo.model_index)
        algo.load_checkpoint_state(group_state["algorithm"])
        torch.set_rng_state(rank_state["rng"])
        meter.load_tensor(rank_state["meter"])
        timers, rows = rank_state["timers"], json.loads(rank_state["rows"])
        resume_load_s = time.perf_counter() - t_load
    torch.distributed.barrier()   # every rank has read the checkpoint before rank 0 touches files
    if lead:   # the rows come from the checkpoint: metrics.jsonl may be gone (snakemake deletes it)
        (out / "summary.json").unlink(missing_ok=True)
        log.replace(rows)
        write_manifest(cfg, out, topo, threads, device, resumed_from=start)
    history: dict[str, list[dict]] = {}
    for row in rows:
        history.setdefault(row["model"], []).append(row)
    start = start or 0

    def save_checkpoint(done: int) -> None:
        t0 = time.perf_counter()
        group_state = None
        if topo.dp_rank == 0:
            group_state = {"group": topo.model_index, "algorithm": algo.checkpoint_state()}
        checkpoint.save(out, done, run_id, topo.rank, group_state,
                        {"rng": torch.get_rng_state(), "meter": meter.as_tensor(), "timers": timers,
                         "rows": json.dumps(rows)},
                        barrier=lambda: meter.barrier())
        timers["checkpoint_s"] = timers.get("checkpoint_s", 0.0) + time.perf_counter() - t0
        timers["checkpoints"] = timers.get("checkpoints", 0) + 1

    launched = float(os.environ.get("CODIST_LAUNCH_UNIX", t_process))
    progress = Progress(steps, start, cfg.name or run_id, enabled=lead)
    first_step_unix = None
    diverged_at = None   # this rank's first update with a NaN or inf loss
    for step in range(start, steps):
        t0 = time.perf_counter()
        if first_step_unix is None:
            first_step_unix = time.time()
        loss = algo.train_step(step, stream.batch(step))
        timers["train_s"] += time.perf_counter() - t0
        timers["loss_sum"] += loss
        timers["loss_n"] += 1
        if getattr(algo, "last_distill", None) is not None:
            timers["distill_sum"] = timers.get("distill_sum", 0.0) + algo.last_distill
            timers["distill_n"] = timers.get("distill_n", 0) + 1
        done = step + 1
        if diverged_at is None and not math.isfinite(loss):
            diverged_at = done   # the ranks stop together at the next evaluation (no extra collective)
        heartbeat.beat(done)
        if done % cfg.train.eval_every == 0 or done == steps:
            t1 = time.perf_counter()
            results = evaluate(timers["loss_sum"], timers["loss_n"], timers.get("distill_sum", 0.0),
                               timers.get("distill_n", 0))
            timers["eval_s"] += time.perf_counter() - t1
            timers["loss_sum"], timers["loss_n"], timers["distill_sum"], timers["distill_n"] = 0.0, 0, 0.0, 0
            bad = non_finite_losses(results)
            if bad:   # every rank sees the same all-reduced losses, so every rank stops here
                at = diverged_at or done
                losses = ", ".join(f"{v} (model {n})" for n, v in bad.items())
                msg = (f"diverged at update {at}: training loss {losses} at the evaluation after update {done}; "
                       f"no summary or model written "
                       f"(lower optimizer.lr or set optimizer.grad_clip)")
                progress.close()
                if lead:
                    print(f"codist: {msg}", file=sys.stderr)
                heartbeat.write({"state": "diverged", "step": at, "error": msg})
                torch.distributed.destroy_process_group()
                return EXIT_DIVERGED
            for name, metrics in results.items():
                row = {"step": done, "samples": done * per_model_batch, "wall_s": round(timers["train_s"], 4),
                       "model": name, **metrics}
                history.setdefault(name, []).append(row)
                rows.append(row)
                if lead:
                    log.append(row)
            progress.evaluated(done, workload.metric.name, results[evaluate.names[0]][workload.metric.name])
        progress.step()
        if done < steps and done % STOP_CHECK_EVERY == 0 and stop.agreed(meter):
            save_checkpoint(done)
            if lead:
                print(f"codist: stopped by signal after update {done}; checkpoint written, rerun to resume",
                      file=sys.stderr)
            heartbeat.write({"state": "preempted", "step": done})
            meter.barrier()   # every rank has said so before any exits: a launcher may kill the rest then
            torch.distributed.destroy_process_group()
            return EXIT_PREEMPTED
        if cfg.train.checkpoint_every and done % cfg.train.checkpoint_every == 0 and done < steps:
            save_checkpoint(done)
    progress.close()

    models = algo.eval_models()   # on every rank: some algorithms gather models here
    if cfg.train.save_model and topo.dp_rank == 0:  # one copy per model, from its group's first rank
        for name, model in models.items():
            atomic_torch_save(model.state_dict(), out / f"model_{name}.pt")

    totals = meter.as_tensor()
    meter.all_reduce(totals, category="control")
    if lead:
        setup_s = (first_step_unix - launched) if first_step_unix else None
        atomic_write_json(out / "summary.json", summary(cfg, workload, history, totals, topo, steps,
                                                        per_model_batch, timers, setup_s=setup_s,
                                                        elapsed_s=time.time() - launched, resumed_from=start,
                                                        resume_load_s=resume_load_s))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    heartbeat.finish()
    return 0


def non_finite_losses(results: dict[str, dict]) -> dict[str, float]:
    """{model: value} of each training or distillation loss of an evaluation that is NaN or inf."""
    return {name: m[k] for name, m in results.items() for k in ("train_loss", "distill_loss")
            if m.get(k) is not None and not math.isfinite(m[k])}


def summary(cfg, workload, history, totals, topo, steps, per_model_batch, timers, setup_s, elapsed_s,
            resumed_from, resume_load_s):
    metric = workload.metric
    pick = max if metric.higher_is_better else min
    per_model = {}
    for name, rows in history.items():
        best = pick(rows, key=lambda r: r[metric.name])
        per_model[name] = {"final": rows[-1], "best": {"step": best["step"], metric.name: best[metric.name]}}
    headline_model = next(iter(history))   # model "0": the first (or only) model
    headline = per_model[headline_model]
    return {
        "run_id": cfg.run_id(),
        "name": cfg.name,
        "workload": cfg.workload.name,
        "algorithm": cfg.algorithm.name,
        "metric": metric.name,
        "higher_is_better": metric.higher_is_better,
        "target": metric.target,
        "headline_model": headline_model,
        "final_metric": headline["final"][metric.name],
        "best_metric": headline["best"][metric.name],
        "steps": steps,
        "samples": steps * per_model_batch,
        "world_size": topo.world_size,
        "wall_s": round(timers["train_s"], 4),
        "eval_s": round(timers["eval_s"], 4),
        "checkpoint_s": round(timers.get("checkpoint_s", 0.0), 4),   # writing checkpoints (all of them)
        "checkpoints": timers.get("checkpoints", 0),
        "setup_s": None if setup_s is None else round(setup_s, 4),   # launch to first update (of this process)
        "elapsed_s": round(elapsed_s, 4),
        "resumed_from_step": resumed_from or None,
        "resume_load_s": None if resume_load_s is None else round(resume_load_s, 4),   # reading the checkpoint
        "models": per_model,
        "comm": summarize(totals, topo.world_size, steps),
    }


if __name__ == "__main__":
    sys.exit(main())
