"""Harness overhead: codist's training throughput against plain PyTorch / torch.distributed loops
on the same model, data, batch, optimizer, schedule and threads, and what a codistillation
step costs against an all-reduce step.

    python benchmarks/harness_overhead.py [--steps 300] [--repeats 3] [--out results/bench]

Model and data: the embedded cifar preset's (replications/presets/embedded/cifar.yaml: ResNet-8
width 16 on 16x16 images, SGD momentum 0.9, weight decay, cosine schedule, 64 images per rank),
1 thread per rank (2 threads per rank on this 2-core machine is 3x slower).

Pairs compared (samples per second per model; codist's is `samples / wall_s` from summary.json,
the plain loop's is its own timed loop on rank 0; both include fetching each batch):
  allreduce, 1 rank     codist (no engine at one rank:       vs  a hand-written loop
                        updates.LocalUpdate)
                        (forward, loss, backward, SGD step, LR step) started by torchrun
                        and vs a plain DeepSpeed loop (deepspeed.initialize with a minimal
                        ZeRO-0 fp32 config, engine.backward / engine.step), torchrun
  allreduce, 2 ranks    codist (a DeepSpeed engine)            vs  torch DDP (gloo, one bucket,
                        broadcast_buffers=False as DeepSpeed's engine does not sync BatchNorm
                        statistics either), torchrun, same per-rank batch; and vs the plain
                        DeepSpeed loop at 2 ranks (so the overhead splits into DeepSpeed's
                        engine and codist's own)
  codistill, 2 x 1      codist (checkpoint exchange every 50   vs  a hand-written torch.distributed
                        updates, same data, alpha 1, T 1)          codistillation loop: the same
                                                                   broadcast of each model's state
                                                                   every 50 updates into a frozen
                                                                   teacher copy, teacher forward,
                                                                   CE + KL
overhead = plain / codist - 1 (target: <= 3%, issue 12). The median over repeats of the paired ratio is
the headline (each repeat runs the plain and the codist variant back to back, so a change in
the machine's load hits both); the medians of each side are reported too.

codist's `wall_s` sums each update's time and leaves out what the loop does between updates
(the 4-byte stop-flag all-reduce every 10 updates that lets SIGTERM stop every rank after the
same update, the heartbeat file every 2 s, the progress bar). `loop_overhead` also charges those: it uses
samples / (elapsed_s - setup_s - eval_s), i.e. launch-to-summary time less set-up and
evaluation (it also includes the end-of-run gathering of the counters).

Step cost of codistillation (target: <= 1.5x an all-reduce step at equal per-model batch;
Anil: the teacher's extra forward pass costs up to ~1.5x): codist's codistill 2x1 step time
(64 per model) over
  - codist allreduce 1 rank x 64 (equal per-model and per-rank batch: Anil's basis), and
  - codist allreduce 2 ranks x 32 (equal per-model batch and devices: Sodhani's basis),
and the plain codistill loop over the plain 1-rank loop (the cost without the harness).

Also reported: launch-to-first-update (`setup_s`) of codist's runs against the plain loop's
(torchrun start to first update), the fixed cost per run.

Writes results/bench/harness_overhead.csv (one row per comparison: ratio median / min / max,
the target and whether it is met, median throughputs) and harness_overhead_raw.csv (every run,
with the machine's load average).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

EXCHANGE_EVERY = 50
OVERHEAD_TARGET = 0.03   # plain / codist - 1 (issue 12)


# --------------------------------------------------------------------------- plain loops (workers)

def _setup_worker(kind: str, steps: int):
    """torch, the preset's config, workload, a model, its optimizer and schedule, on 1 thread."""
    import torch
    import torch.distributed as dist

    from codist import config
    from codist.runtime.optim import build_optimizer, build_scheduler
    from codist.workloads import build_workload

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if kind == "deepspeed":
        import deepspeed
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    elif world > 1:
        dist.init_process_group("gloo")
    raw = _preset()
    cfg = config.validate(raw, "harness_overhead worker")
    workload = build_workload(cfg.workload, cfg.seed)
    torch.manual_seed(cfg.seed * 1009 + rank)
    model = workload.build_model()
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    sched = build_scheduler(opt, cfg.schedule, steps)
    return torch, dist, cfg, workload, model, opt, sched, world, rank


def worker(kind: str, steps: int, batch: int, result: str) -> None:
    """One rank of a plain loop; rank 0 writes {loop_s, samples_per_model, startup_s} to `result`."""
    torch, dist, cfg, workload, model, opt, sched, world, rank = _setup_worker(kind, steps)
    import torch.nn.functional as F

    from codist.runtime.data import BatchStream
    train = workload.train_dataset()
    engine = None
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, broadcast_buffers=False)
        stream = BatchStream(train, batch, world, rank, cfg.seed)    # rank's slice of the global batch
        per_model = batch * world
    elif kind == "deepspeed":
        import deepspeed
        # the DeepSpeed documentation's minimal data-parallel config: ZeRO-0, fp32, no clipping
        ds_config = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
                     "gradient_clipping": 0.0, "zero_optimization": {"stage": 0}, "steps_per_print": 10**9}
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=sched, config=ds_config)
        net = engine
        stream = BatchStream(train, batch, world, rank, cfg.seed)
        per_model = batch * world
    else:
        net = model
        stream = BatchStream(train, batch, 1, 0, cfg.seed)           # each model the same batches
        per_model = batch
    teacher = None
    if kind == "codistill":
        import copy
        teacher = copy.deepcopy(model).eval().requires_grad_(False)

    def state(m):
        return [p.data for p in m.parameters()] + [b for b in m.buffers() if b.is_floating_point()]

    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    first = time.time()
    for step in range(steps):
        x, y = stream.batch(step)
        if teacher is not None:
            if step % EXCHANGE_EVERY == 0:          # every model's state to the other ranks
                mine = torch.cat([t.reshape(-1) for t in state(model)])
                for j in range(world):
                    buf = mine if j == rank else torch.empty_like(mine)
                    dist.broadcast(buf, src=j)
                    if j != rank:
                        offset = 0
                        for t in state(teacher):
                            t.copy_(buf[offset:offset + t.numel()].view_as(t))
                            offset += t.numel()
            with torch.no_grad():
                target = F.softmax(teacher(x), dim=-1)
        logits = net(x)
        loss = workload.loss(logits, y)
        if teacher is not None:
            loss = loss + F.kl_div(F.log_softmax(logits, dim=-1), target, reduction="batchmean")
        if engine is not None:                       # the engine zeroes, all-reduces, steps and schedules
            engine.backward(loss)
            engine.step()
        else:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        loss.item()                                  # codist's loop reads the loss every update too
    loop_s = time.perf_counter() - t0
    if rank == 0:
        launched = float(os.environ.get("BENCH_LAUNCH_UNIX", first))
        Path(result).write_text(json.dumps({"loop_s": loop_s, "samples_per_model": steps * per_model,
                                            "startup_s": first - launched}))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain(kind: str, ranks: int, steps: int, batch: int) -> dict:
    """Start a plain loop with torchrun (1 thread per rank) and return rank 0's timing."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "",
               "BENCH_LAUNCH_UNIX": repr(time.time()),
               # this environment's tools first (its ninja builds DeepSpeed's CPU op), as codist.launching.launch does
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
               "--master_port", str(free_port()), str(Path(__file__).resolve()), "--worker", kind,
               "--steps", str(steps), "--batch", str(batch), "--result", str(result)]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"plain {kind} loop failed:\n{proc.stderr[-3000:]}")
        r = json.loads(result.read_text())
    return {"samples_per_s": r["samples_per_model"] / r["loop_s"], "startup_s": r["startup_s"]}


# --------------------------------------------------------------------------- codist runs

def _preset() -> dict:
    import yaml
    return yaml.safe_load((Path(__file__).resolve().parents[1] / "replications/presets/embedded/cifar.yaml").read_text())


CODIST = {   # name -> (overrides, per-rank batch)
    "allreduce 1x64": ({"parallel": {"world_size": 1}}, 64),
    "allreduce 2x64": ({"parallel": {"world_size": 2}}, 64),
    "allreduce 2x32": ({"parallel": {"world_size": 2}}, 32),
    "codistill 2x1x64": ({"parallel": {"world_size": 2, "models": 2},
                          "algorithm": {"name": "codistill", "exchange_every": EXCHANGE_EVERY, "data": "same",
                                        "alpha": 1.0, "temperature": 1.0, "burn_in": 0}}, 64),
}
PLAIN = {"plain 1x64": ("single", 1, 64), "deepspeed 1x64": ("deepspeed", 1, 64), "ddp 2x64": ("ddp", 2, 64),
         "deepspeed 2x64": ("deepspeed", 2, 64), "plain codistill 2x1x64": ("codistill", 2, 64)}
#: (plain runs, codist run) measured back to back in each repeat, in this order
SCHEDULE = ((("plain 1x64", "deepspeed 1x64"), "allreduce 1x64"), (("ddp 2x64", "deepspeed 2x64"), "allreduce 2x64"),
            (("plain codistill 2x1x64",), "codistill 2x1x64"), ((), "allreduce 2x32"))


def codist_run(name: str, steps: int) -> dict:
    from benchmarks import benchlib
    over, batch = CODIST[name]
    raw = benchlib.merge(_preset(), over, {"name": f"overhead-{name}", "train": {
        "steps": steps, "batch_per_rank": batch, "eval_every": 10**6, "save_model": False},
        "launch": {"threads_per_rank": 1}})
    s, _ = benchlib.run(raw, f"harness_overhead {name}")
    loop = s["elapsed_s"] - s["setup_s"] - s["eval_s"]
    return {"samples_per_s": s["samples"] / s["wall_s"], "loop_samples_per_s": s["samples"] / loop,
            "setup_s": s["setup_s"], "wall_s": s["wall_s"], "elapsed_s": s["elapsed_s"]}


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison, ratios paired within each repeat."""
    by = {name: g.set_index("repeat") for name, g in raw.groupby("run")}

    def paired(num: str, den: str, col_n: str = "samples_per_s", col_d: str = "samples_per_s"):
        if num not in by or den not in by:
            return None
        r = (by[num][col_n] / by[den][col_d]).dropna()
        return r.median(), r.min(), r.max(), len(r)

    rows = []

    def minus_one(ratio):   # a throughput ratio -> an overhead (None: the pair was left out)
        return None if ratio is None else (ratio[0] - 1, ratio[1] - 1, ratio[2] - 1, ratio[3])

    def add(kind, comparison, num, den, ratio, target, note, col_n="samples_per_s", col_d="samples_per_s"):
        if ratio is None:   # a pair left out (--only)
            return
        med, lo, hi, n = ratio
        rows.append({"kind": kind, "comparison": comparison, "ratio_median": med, "ratio_min": lo, "ratio_max": hi,
                     "repeats": n, "target": target,
                     "meets_target": None if target is None else bool(med <= target),
                     "numerator_samples_per_s_median": statistics.median(by[num][col_n]),
                     "denominator_samples_per_s_median": statistics.median(by[den][col_d]),
                     "numerator": num, "denominator": den, "note": note})

    for plain_name, codist_name, label in (("plain 1x64", "allreduce 1x64", "allreduce, 1 rank"),
                                           ("deepspeed 1x64", "allreduce 1x64", "allreduce, 1 rank, vs a DeepSpeed loop"),
                                           ("ddp 2x64", "allreduce 2x64", "allreduce, 2 ranks"),
                                           ("deepspeed 2x64", "allreduce 2x64", "allreduce, 2 ranks, vs a DeepSpeed loop"),
                                           ("plain codistill 2x1x64", "codistill 2x1x64", "codistill, 2 models x 1 rank")):
        add("overhead", f"{label}: plain / codist - 1 (wall_s)", plain_name, codist_name,
            minus_one(paired(plain_name, codist_name)), OVERHEAD_TARGET, "codist throughput = samples / wall_s")
        add("loop_overhead", f"{label}: plain / codist - 1 (elapsed - setup - eval)", plain_name, codist_name,
            minus_one(paired(plain_name, codist_name, col_d="loop_samples_per_s")), OVERHEAD_TARGET,
            "also charges the stop-flag all-reduce, heartbeat, progress bar, end-of-run counters",
            col_d="loop_samples_per_s")
    # step time ratio = throughput of the all-reduce run / throughput of the codistill run (per model)
    add("step_cost", "codistill 2x1 (64/model) / allreduce 1 rank x 64: step time", "allreduce 1x64",
        "codistill 2x1x64", paired("allreduce 1x64", "codistill 2x1x64"), 1.5,
        "equal per-model and per-rank batch (Anil's basis); codist both")
    add("step_cost", "codistill 2x1 (64/model) / allreduce 2 ranks x 32: step time", "allreduce 2x32",
        "codistill 2x1x64", paired("allreduce 2x32", "codistill 2x1x64"), 1.5,
        "equal per-model batch and devices (Sodhani's basis); codist both")
    add("step_cost", "plain codistill 2x1 / plain loop 1 rank x 64: step time", "plain 1x64",
        "plain codistill 2x1x64", paired("plain 1x64", "plain codistill 2x1x64"), 1.5,
        "without the harness: the cost of the teacher forward (and 2 processes on 2 cores)")
    # fixed cost per run
    setup = statistics.median(raw[raw.run.isin(list(CODIST))].setup_s.dropna())
    start = statistics.median(raw[raw.run.isin(list(PLAIN))].startup_s.dropna())
    rows.append({"kind": "setup", "comparison": "launch to first update, s: codist (median of all runs) / "
                 "plain torchrun loop", "ratio_median": setup / start, "repeats": len(raw) // len(by),
                 "numerator": f"codist setup_s median {setup:.1f} s", "denominator": f"plain startup median {start:.1f} s",
                 "note": "fixed per run; codist: launcher, imports, process groups (DeepSpeed's shm_comm op), "
                         "data, engine"})
    return pd.DataFrame(rows)


def main() -> None:
    from benchmarks import benchlib
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="results/bench")
    p.add_argument("--only", action="append", choices=list(CODIST), default=None,
                   help="measure only the pairs of this codist run (repeatable), e.g. more repeats of one pair "
                        "on a machine whose speed drifts; use another --out to keep the full table")
    p.add_argument("--worker", choices=["single", "ddp", "deepspeed", "codistill"], help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=64, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.batch, args.result)
        return
    t0 = time.time()
    rows = []
    for r in range(args.repeats):
        # plain and codist variants of each pair back to back; pairs in a fixed order
        for plain_names, codist_name in SCHEDULE:
            if args.only and codist_name not in args.only:
                continue
            for plain_name in plain_names:
                kind, ranks, batch = PLAIN[plain_name]
                load = benchlib.loadavg()
                rows.append({"repeat": r, "run": plain_name, "harness": "plain", "ranks": ranks, "batch_per_rank": batch,
                             "steps": args.steps, "loadavg": load, **plain(kind, ranks, args.steps, batch)})
                print(rows[-1], flush=True)
            load = benchlib.loadavg()
            over, batch = CODIST[codist_name]
            rows.append({"repeat": r, "run": codist_name, "harness": "codist",
                         "ranks": over["parallel"]["world_size"], "batch_per_rank": batch, "steps": args.steps,
                         "loadavg": load, **codist_run(codist_name, args.steps)})
            print(rows[-1], flush=True)
            benchlib.write_csv(pd.DataFrame(rows), args.out, "harness_overhead_raw.csv")
    raw = pd.DataFrame(rows)
    table = summarise(raw)
    table.insert(0, "workload", "cifar embedded preset: resnet8 w16, 16x16 images, 1 thread per rank")
    table["steps"] = args.steps
    benchlib.write_csv(table, args.out, "harness_overhead.csv")
    print(table[["kind", "comparison", "ratio_median", "ratio_min", "ratio_max", "target", "meets_target"]]
          .to_markdown(index=False, floatfmt=".3f"))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
