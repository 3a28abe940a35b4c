"""The per-rank entry point: `python -m codist.rank.train --config RUN/config.yaml --out RUN`.

Started on every rank by the process tree `codist run` picked (codist.launching: the DeepSpeed
launcher, torchrun, srun, or forked by codist.launching.fork in `codist run`'s child or in a warm
server's supervisor; a lone rank is started directly), which sets RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT (an srun task: codist.rank_env derives them from SLURM's) and passes --local_rank.
The loop knows the algorithm and the workload only through their interfaces.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import checkpoint
from .. import config as config_mod
from ..algorithms import TrainContext, build_algorithm
from ..config import RunConfig
from ..data_root import workload_with_data
from .evaluation import Evaluator
from ..exits import EXIT_BAD_INPUT as EXIT_CONFIG, EXIT_DIVERGED, EXIT_FAILED, EXIT_PREEMPTED  # noqa: F401  (codist.exits: once)
from ..owner import owner_gone, start_ticks
from .machine import Machine
from .progress import Progress
from ..rank_env import rank_threads
from ..runlog import (MetricsLog, RunGone, RunGuard, WriteError, atomic_torch_save, atomic_write_bytes,
                     atomic_write_json, git_state, hardware, metrics_record, package_versions, rows_bytes,
                     tee_rank_output)
from ..runtime import allocator
from ..runtime.comm import CommMeter, summarize
from ..runtime.cuda_defaults import backend_settings, configure_backends
from ..runtime.data import seed_rank_streams
from ..runtime.distributed import Topology, init, pick_device, set_timeout
from ..runtime.engine import deepspeed_config
from ..runtime.heartbeat import Heartbeat
from ..workloads import build_workload


STOP_CHECK_EVERY = 10   # updates between the ranks' agreement on a stop signal (one tiny all-reduce)
JOB_OWNER = "CODIST_JOB_OWNER"   # "<host>:<pid>:<start ticks>": the workflow whose job started this run
GO_ON, STOP, LOST = 0, 1, 2      # what the ranks agree on: train on, checkpoint and stop, stop writing nothing


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="codist.rank.train", description=__doc__)
    p.add_argument("--config", required=True, help="resolved run config (YAML)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help="set by the launcher")
    return p.parse_args(argv)


def write_manifest(cfg, out: Path, topo, threads: int, device, resumed_from: int | None,
                   guard: RunGuard | None = None) -> None:
    if guard is not None:
        guard.check(out / "manifest.json")
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
        "math": backend_settings(),   # TF32, cuDNN and determinism as set (train.tf32, train.deterministic)
        "deepspeed_config": deepspeed_config(cfg),   # what an engine of this run is built with
        "launcher": os.environ.get("CODIST_LAUNCHER", "unknown"),
        "command": sys.argv,
        "started_unix": time.time(),
        "resumed_from_step": resumed_from,
    })


def job_gone() -> bool:
    """True when the workflow process named in CODIST_JOB_OWNER (workflows/results_lock.py: the
    snakemake whose job ran `codist run`) no longer runs; False when none is named, or when it runs
    on another host (an srun task on another node of the job cannot see it)."""
    host, pid, ticks = (os.environ.get(JOB_OWNER, "").split(":") + ["", "", ""])[:3]
    return (host == platform.node() and pid.isdigit() and ticks.isdigit()
            and start_ticks(pid) != int(ticks))


class StopFlag:
    """SIGTERM / SIGUSR1 (SLURM preemption) ask the run to checkpoint and exit; so does the end
    of the `codist run` that started the ranks (codist.owner) or of the workflow whose job started
    it (a kill -9 of snakemake: its rerun would delete this run's outputs and start it again). A
    run directory that is no longer this run's (`RunGuard`) stops it without a checkpoint. The
    ranks agree with one tiny all-reduce every STOP_CHECK_EVERY updates, so they all stop after the
    same update."""

    def __init__(self):   # (set_up sets `guard`)
        self.raised, self.guard, self.why = GO_ON, None, None
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self._handler)

    def _handler(self, signum, frame):
        self.raised = max(self.raised, STOP)

    def agreed(self, meter, device: torch.device) -> int:
        """GO_ON, STOP or LOST, the same on every rank (the highest any rank raised)."""
        if self.raised == GO_ON and owner_gone():
            print("codist: the codist run that started this rank is gone; stopping", file=sys.stderr)
            self.raised = STOP
        if self.raised == GO_ON and job_gone():
            print(f"codist: the workflow that started this run is gone (pid {os.environ[JOB_OWNER].split(':')[1]}); "
                  f"stopping", file=sys.stderr)
            self.raised = STOP
        self.why = self.guard.problem() if self.guard is not None else None
        if self.why:
            self.raised = LOST
        flag = torch.tensor([self.raised], dtype=torch.int32, device=device)   # NCCL: on the GPU
        meter.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, category="control")
        return int(flag.item())


class LossSums:
    """The training-loss sums of the current logging interval, on the run's device: adding an
    update's loss is a device operation, so the host waits for the device once per evaluation
    (`read`), not after every update. In float64, added in update order from the value the host
    summed before (a float32 loss read as a Python float), so the logged numbers are the same. It
    also keeps this rank's first update with a NaN or inf loss (0: none)."""

    def __init__(self, device: torch.device, loss_sum: float, distill_sum: float):
        self.device = device
        self.reset(loss_sum, distill_sum)

    def reset(self, loss_sum: float = 0.0, distill_sum: float = 0.0) -> None:
        self.sums = torch.tensor([loss_sum, distill_sum, 0.0], dtype=torch.float64, device=self.device)

    def add(self, done: int, task: torch.Tensor, distill: torch.Tensor | None) -> None:
        self.sums[0] += task.double()
        if distill is not None:
            self.sums[1] += distill.double()
        first = (self.sums[2] == 0) & ~torch.isfinite(task)
        self.sums[2] = torch.where(first, float(done), self.sums[2])

    def read(self) -> tuple[float, float, int | None]:
        """(loss sum, distillation sum, first non-finite update or None): the one host sync."""
        loss_sum, distill_sum, bad = self.sums.tolist()
        return loss_sum, distill_sum, int(bad) or None


@dataclass
class Run:
    """What the phases of one rank's run share."""
    cfg: RunConfig
    out: Path
    topo: Topology
    meter: CommMeter
    workload: object
    algo: object
    stream: object
    evaluate: Evaluator
    log: MetricsLog
    heartbeat: Heartbeat
    stop: StopFlag
    threads: int
    device: torch.device
    launched: float   # when `codist run` launched the job (unix time)
    guard: RunGuard | None = None                   # the run directory as this rank found it
    machine: Machine | None = None                  # throughput, MFU and memory of each interval
    timers: dict = field(default_factory=lambda: {"train_s": 0.0, "eval_s": 0.0, "loss_sum": 0.0, "loss_n": 0})
    rows: list = field(default_factory=list)        # every metrics row so far (checkpointed with the run)
    history: dict = field(default_factory=dict)     # model -> its rows (for the summary)
    start: int = 0                                  # first update of this process (a resumed run's step)
    resume_load_s: float | None = None
    first_step_unix: float | None = None
    losses: LossSums | None = None                  # this interval's loss sums, on the device

    @property
    def lead(self) -> bool:
        return self.topo.rank == 0

    @property
    def per_model_batch(self) -> int:
        return self.cfg.train.batch_per_rank * self.topo.ranks_per_model


def main(argv=None) -> int:
    """set up, resume, train, finish: each a function below."""
    tee_rank_output()   # RUN/logs/rank<N>.log, when `codist run` started this rank
    run = set_up(parse_args(argv))
    try:
        resume(run)
        set_timeout(run.topo, run.cfg.launch.collective_timeout_s)   # start-up over: the training's limit
        code = train_loop(run)
        if code is None:
            finish(run)
    except (RunGone, WriteError) as e:
        return stopped(run, directory_lost(run, e))
    return code or 0


def directory_lost(run: Run, e: RunGone | WriteError) -> RunGone | WriteError:
    """A failed write (WriteError) while the guard finds the run directory moved or replaced (it can
    happen between the guard's check and the write: the folders vanish, ENOENT) is the directory's
    loss, said as such, not a disk error."""
    why = run.guard.problem() if isinstance(e, WriteError) and run.guard is not None else None
    return RunGone(f"{why}; a write failed ({e}), nothing more written", directory=True) if why else e


def stopped(run: Run, e: RunGone | WriteError) -> int:
    """A write that must not happen (RunGone) or could not (WriteError, a full disk): one line, no
    summary, EXIT_FAILED. A directory that is another's now gets no rank report either."""
    print(f"codist: rank {run.topo.rank}: {e}", file=sys.stderr)
    if not getattr(e, "directory", False):
        try:
            run.heartbeat.write({"state": "error", "error": str(e)})
        except OSError:   # the same full disk: the line above said it
            pass
    return EXIT_FAILED


def check_world_size(cfg: RunConfig) -> None:
    """The launcher's world (WORLD_SIZE, env://) must be the config's `parallel.world_size`:
    ranks per model are derived from it, so a mismatch would train another topology silently."""
    real = int(os.environ.get("WORLD_SIZE", "1"))
    if real != cfg.parallel.world_size:
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"codist: parallel.world_size={cfg.parallel.world_size} but the launcher started {real} "
                  f"rank(s) (WORLD_SIZE={real}); launch with codist run, or make them equal", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG)


def set_up(args) -> Run:
    """Config, threads and device, the world-size check, process groups and meter, the workload,
    the algorithm (models, engines), its data stream and evaluator."""
    t_process = time.time()
    out = Path(args.out)
    cfg = config_mod.load(args.config)
    threads = rank_threads(os.environ, cfg.launch.threads_per_rank)   # an srun task: its node's allocation
    os.environ["OMP_NUM_THREADS"] = os.environ["CODIST_THREADS_PER_RANK"] = str(threads)   # its workers' too
    torch.set_num_threads(threads)
    allocator.apply(cfg.launch.allocator)   # before the workload's and model's first large tensors
    device, backend = pick_device(cfg.launch.device, cfg.launch.backend)
    configure_backends(device, cfg.train.tf32, cfg.train.deterministic)   # cuDNN, TF32; train.deterministic
    check_world_size(cfg)
    guard = RunGuard(out)   # before anything is written: the directory this run writes into
    stop = StopFlag()
    stop.guard = guard
    topo = init(cfg.parallel.models, backend, timeout_s=cfg.launch.start_timeout_s)   # start-up's limit
    heartbeat = Heartbeat(out, topo.rank, topo.world_size, cfg.launch.hang_timeout_s)   # beats while preparing
    meter = CommMeter(topo.rank, topo.model_of(), device)   # checks every collective's tensors are on `device`
    meter.install_hooks()
    workload = build_workload(workload_with_data(cfg), cfg.seed)   # data_dir joined to launch.data_root
    ctx = TrainContext(cfg, topo, meter, workload, device, out)
    algo = build_algorithm(ctx)
    algo.setup()
    stream = algo.train_stream()
    evaluate = Evaluator(ctx, algo)
    seed_rank_streams(cfg.seed, topo.model_index, topo.dp_rank, algo.shared_init)   # ranks would augment alike
    log = MetricsLog(out / "metrics.jsonl", config_mod.to_dict(cfg), guard)   # the config names its TensorBoard run
    machine = Machine(cfg, device, algo.model, topo.ranks_per_model)
    return Run(cfg, out, topo, meter, workload, algo, stream, evaluate, log, heartbeat,
               stop, threads, device, launched=float(os.environ.get("CODIST_LAUNCH_UNIX", t_process)), guard=guard,
               machine=machine)


def resume(run: Run) -> None:
    """From the newest checkpoint, if any (a stop signal's too, whatever checkpoint_every), as rank 0
    found it (every rank checks its files hold that step): state, RNG, meter counters, timers and
    metrics rows as they were; then rank 0 rewrites the metrics
    log from those rows (Snakemake may have deleted it) and writes the manifest."""
    cfg, topo, out = run.cfg, run.topo, run.out
    run_id = cfg.run_id()
    start = checkpoint.agreed_step(out, run_id, topo.rank, run.meter, run.device,   # rank 0's, broadcast
                                   checkpoint.loaded_files(topo.world_size, topo.models))
    if start is not None:
        t_load = time.perf_counter()
        group_state, rank_state = checkpoint.load(out, start, run_id, topo.rank, topo.model_index)
        with checkpoint.reading(out, start, f"group-{topo.model_index}.pt"):
            run.algo.load_checkpoint_state(group_state["algorithm"])
        restore_rank(run, start, rank_state)
        run.resume_load_s = time.perf_counter() - t_load
    torch.distributed.barrier()   # every rank has read the checkpoint before rank 0 touches files
    if run.lead:
        if run.guard is not None:
            run.guard.check(out / "summary.json")
        (out / "summary.json").unlink(missing_ok=True)
        run.log.replace(run.rows)
        write_manifest(cfg, out, topo, run.threads, run.device, resumed_from=start, guard=run.guard)
    for row in run.rows:
        run.history.setdefault(row["model"], []).append(row)
    run.start = start or 0


def restore_rank(run: Run, start: int, rank_state: dict) -> None:
    """This rank's own file of the checkpoint at update `start` (rank-<r>.pt): the algorithm's
    per-rank state (PowerSGD's residuals), RNG, meter counters, timers and metrics rows. A key the
    file lacks (another file in its place, another codist version) is one line naming the file
    and the key (checkpoint.reading), not a KeyError."""
    with checkpoint.reading(run.out, start, f"rank-{run.topo.rank}.pt"):
        run.algo.load_rank_checkpoint_state(rank_state.get("algorithm", {}))
        checkpoint.restore_rng(rank_state, run.device)
        run.meter.load_tensor(rank_state["meter"])
        run.timers, run.rows = rank_state["timers"], json.loads(rank_state["rows"])


def save_checkpoint(run: Run, done: int) -> None:
    t0, topo, timers = time.perf_counter(), run.topo, run.timers
    if run.losses is not None:   # the interval's sums so far, continued from there on resume
        timers["loss_sum"], timers["distill_sum"], _ = run.losses.read()
    group_state = None
    if topo.dp_rank == 0:
        group_state = {"group": topo.model_index, "algorithm": run.algo.checkpoint_state()}
    checkpoint.save(run.out, done, run.cfg.run_id(), topo.rank, group_state,
                    {**checkpoint.rng_state(run.device), "meter": run.meter.as_tensor(), "timers": timers,
                     "rows": json.dumps(run.rows), "algorithm": run.algo.rank_checkpoint_state()},
                    barrier=lambda: run.meter.barrier(), check=run.guard.check if run.guard else None)
    timers["checkpoint_s"] = timers.get("checkpoint_s", 0.0) + time.perf_counter() - t0
    timers["checkpoints"] = timers.get("checkpoints", 0) + 1


def train_loop(run: Run, until: int | None = None) -> int | None:
    """The updates from run.start on (to `until`, default the last: benchmarks/loop_overhead.py times
    the loop in blocks), with evaluation, the stop-signal agreement and checkpoints at their
    cadences. Returns an exit code when the run stops early (diverged, signalled)."""
    cfg, algo, timers, steps = run.cfg, run.algo, run.timers, run.cfg.train.steps
    progress = Progress(steps, run.start, cfg.name or cfg.run_id(), enabled=run.lead)
    if run.losses is None:
        run.losses = LossSums(run.device, timers["loss_sum"], timers.get("distill_sum", 0.0))
    for step in range(run.start, steps if until is None else min(until, steps)):
        t0 = time.perf_counter()
        if run.first_step_unix is None:
            run.first_step_unix = time.time()
        with run.machine.counting() if run.machine else nullcontext():   # the first update's FLOPs, for an MFU
            loss = algo.train_step(step, run.stream.batch(step))
        done = step + 1
        distill = getattr(algo, "last_distill", None)
        run.losses.add(done, loss, distill)   # a NaN or inf loss: the ranks stop together at the next evaluation
        timers["loss_n"] += 1
        if distill is not None:
            timers["distill_n"] = timers.get("distill_n", 0) + 1
        timers["train_s"] += time.perf_counter() - t0
        run.heartbeat.beat(done)
        if done % cfg.train.eval_every == 0 or done == steps:
            t0 = time.perf_counter()   # the host waits here for the interval's updates: training time
            timers["loss_sum"], timers["distill_sum"], diverged_at = run.losses.read()
            timers["train_s"] += time.perf_counter() - t0
            code = evaluate_and_log(run, done, diverged_at, progress)
            if code is not None:
                return code
        progress.step()
        t0 = time.perf_counter()   # the agreement reads its all-reduce on the host: it waits for the queued updates
        agreed = done < steps and done % STOP_CHECK_EVERY == 0 and run.stop.agreed(run.meter, run.device)
        timers["train_s"] += time.perf_counter() - t0
        if agreed == LOST:   # every rank stops here, none writes a checkpoint into what is not its directory
            raise RunGone(f"{run.stop.why or 'the run directory was removed or replaced (another rank saw it)'}; "
                          f"stopped after update {done}, nothing more written", directory=True)
        if agreed:
            save_checkpoint(run, done)
            if run.lead:
                print(f"codist: stopped by signal after update {done}; checkpoint written, rerun to resume",
                      file=sys.stderr)
            run.heartbeat.write({"state": "preempted", "step": done})
            run.meter.barrier()   # every rank has said so before any exits: a launcher may kill the rest then
            torch.distributed.destroy_process_group()
            return EXIT_PREEMPTED
        if cfg.train.checkpoint_every and done % cfg.train.checkpoint_every == 0 and done < steps:
            save_checkpoint(run, done)
    progress.close()
    return None


def evaluate_and_log(run: Run, done: int, diverged_at: int | None, progress: Progress) -> int | None:
    """Evaluate every model after update `done` and log its rows; EXIT_DIVERGED (after saying
    why) when a training loss is NaN or inf."""
    timers = run.timers
    t1 = time.perf_counter()
    results = run.evaluate(timers["loss_sum"], timers["loss_n"], timers.get("distill_sum", 0.0),
                           timers.get("distill_n", 0))
    timers["eval_s"] += time.perf_counter() - t1
    timers["loss_sum"], timers["loss_n"], timers["distill_sum"], timers["distill_n"] = 0.0, 0, 0.0, 0
    run.losses.reset()
    bad = non_finite_losses(results)
    broken = {f"{k} {v} (model {n})": v for n, m in results.items() for k, v in m.items()   # NaN in the
              if isinstance(v, float) and not math.isfinite(v)}                           # validation data, say
    if bad or broken:   # every rank sees the same all-reduced losses, so every rank stops here
        at = diverged_at or done
        losses = ", ".join(f"{v} (model {n})" for n, v in bad.items())
        msg = (f"diverged at update {at}: training loss {losses} at the evaluation after update {done}; "
               f"no summary or model written "
               f"(lower optimizer.lr or set optimizer.grad_clip)") if bad else (
               f"the evaluation after update {done} is not finite: {', '.join(broken)} (NaN or inf in the "
               f"validation data, or a model that gives it); no summary or model written")
        progress.close()
        if run.lead:
            print(f"codist: {msg}", file=sys.stderr)
        run.heartbeat.write({"state": "diverged", "step": at, "error": msg})
        torch.distributed.destroy_process_group()
        return EXIT_DIVERGED
    for name, metrics in results.items():
        samples, wall_s = done * run.per_model_batch, round(timers["train_s"], 4)
        previous = run.history.get(name, [None])[-1]
        row = {"step": done, "samples": samples, "wall_s": wall_s, "model": name, **metrics,
               **(run.machine.columns(previous, samples, wall_s) if run.machine else {})}
        run.history.setdefault(name, []).append(row)
        run.rows.append(row)
        if run.lead:
            run.log.append(row)
    if run.machine:
        run.machine.interval_done()
    metric = run.workload.metric.name
    progress.evaluated(done, metric, results[run.evaluate.names[0]][metric])
    return None


def finish(run: Run) -> None:
    """The final models (one file per model, from its group's first rank) and, on rank 0, the
    summary with the whole job's traffic."""
    cfg, topo, meter = run.cfg, run.topo, run.meter
    if cfg.train.save_model:   # the saved model (a later run's teacher) has its group's statistics
        run.algo.sync_norm_statistics("control")
    models = run.algo.eval_models()   # on every rank: some algorithms gather models here
    if topo.dp_rank == 0:   # one copy per model, from its group's first rank
        for name, model in models.items():
            if run.guard is not None:
                run.guard.check(run.out / f"model_{name}.pt")
            if cfg.train.save_model:
                atomic_torch_save(model.state_dict(), run.out / f"model_{name}.pt")
            write_predictions(run, name, model)
    totals = job_traffic(meter, run.device)
    if run.lead:
        setup_s = (run.first_step_unix - run.launched) if run.first_step_unix else None
        record = written_metrics(run)
        atomic_write_json(run.out / "summary.json", {**summary(
            cfg, run.workload, run.history, totals, topo, cfg.train.steps, run.per_model_batch, run.timers,
            setup_s=setup_s, elapsed_s=time.time() - run.launched, resumed_from=run.start,
            resume_load_s=run.resume_load_s), "metrics": record})
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    run.heartbeat.finish()


def written_metrics(run: Run) -> dict:
    """metrics.jsonl's record for the summary (runlog.metrics_record), after checking that the file
    holds exactly the rows this run logged: a run never writes a summary over metrics it did not write."""
    path = run.out / "metrics.jsonl"
    if run.guard is not None:
        run.guard.check(run.out / "summary.json")
    try:
        found = path.read_bytes()
    except FileNotFoundError:
        found = None
    if found != rows_bytes(run.rows):
        raise RunGone(f"{path} {'was removed' if found is None else 'does not hold the rows this run logged'}; "
                      f"stopped without writing a summary", directory=False)
    return metrics_record(found)


def job_traffic(meter: CommMeter, device: torch.device) -> torch.Tensor:
    """The meter's counters summed over every rank (one all-reduce on the run's device), on the CPU."""
    totals = meter.as_tensor().to(device)
    meter.all_reduce(totals, category="control")
    return totals.cpu()


def write_predictions(run: Run, name: str, model) -> None:
    """The workload's per-sample validation predictions of a final model, if it has any (CTR:
    p(click), for churn), as `val_predictions_<name>.npy`: the analysis reads numbers, never models."""
    with torch.no_grad():
        predictions = run.workload.val_predictions(model)
    if predictions is not None:
        buf = io.BytesIO()
        np.save(buf, predictions.cpu().numpy())
        atomic_write_bytes(run.out / f"val_predictions_{name}.npy", buf.getvalue())


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
