"""`make gpu-check`: every full-scale model's training throughput on one GPU, and NCCL across two.

    python benchmarks/gpu_check.py                          # CUDA: 3 x 200 timed steps per model and precision
    python benchmarks/gpu_check.py --device cpu --steps 2 --batch 2   # CPU smoke run of the same code path

For each distinct (model, batch per GPU) of the `--config scale=full` plan (workflows/experiments.py),
the real workload builder (src/codist/workloads) makes the model; inputs are synthetic tensors of the
real shapes (224x224 images, 32x32 CIFAR images, 32-token LM segments, Criteo's 13 + 26 features,
sentence pairs of the data set's mean length), so no data set is needed. A step is forward, the
workload's loss, backward and the run's optimizer, at one of three maths (`--precisions`), each
under the math backends a run sets (codist.runtime.cuda_defaults.configure_backends): tf32 (fp32
weights, TF32 matmuls and convolutions: a run's default, `train.tf32`), fp32 (TF32 off: a run with
`train.tf32: false`) or bf16 (torch.autocast(bfloat16), TF32 on for what stays fp32); each row
records the settings it ran under, and the budget takes a row only for the math it records.
Written to results/bench/gpu_throughput.csv: units/s (images, samples or tokens: the median of
`--repeats` timed blocks, 3 by default, with the lowest and highest block beside it), peak memory,
training FLOPs per sample (torch.utils.flop_counter) and the published reference of
replications/throughput.yaml beside it. Then, with >= 2 GPUs, a 2-rank NCCL all-reduce of a
ResNet-50-sized buffer and a codistillation checkpoint exchange (codist's flat_state broadcast,
checked bit-exact on the receiver); with fewer, a skip line says why (`--collectives` runs the
same over gloo on CPU). The CSV's cuda rows are what `python workflows/budget.py --gpu <kind>` reads.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from codist import budget  # noqa: E402
from codist.workloads import workload_class  # noqa: E402  (pydantic only; the class module imports torch)

COLUMNS = ["model", "gpu", "device", "device_name", "precision", "float32_matmul_precision", "cudnn_allow_tf32",
           "batch_per_gpu", "unit", "units_per_sample",
           "steps", "repeats", "seconds", "samples_per_s", "units_per_s", "units_per_s_min", "units_per_s_max",
           "peak_mem_gib", "train_gflops_per_sample",
           "achieved_tflops", "reference_gpu", "reference_units_per_s", "reference_kind", "reference_source",
           "torch", "date", "error"]


@dataclass
class Spec:
    model: str          # the throughput table's name (codist.budget.model_key)
    cfg: object         # a run config of the full plan that uses it
    batch: int


def full_specs(replications: Path) -> list[Spec]:
    """One spec per distinct (model, batch per rank, language pair) of the full-scale plan."""
    from workflows.budget import load_full_plan   # the plan's parser, only when planning
    plan = load_full_plan(replications)
    seen = {}
    for cfg in plan.configs.values():
        w = cfg.workload
        key = (budget.model_key(cfg), cfg.train.batch_per_rank, getattr(w, "source_lang", None))
        seen.setdefault(key, Spec(key[0], cfg, cfg.train.batch_per_rank))
    return sorted(seen.values(), key=lambda s: (s.model, s.batch))


# --------------------------------------------------------------------------- models and synthetic batches

class _VocabOnly:
    """An LM data source that knows only its vocabulary size (gpu_check trains on synthetic tokens)."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def target(self):
        return None

    def eval_extras(self, val_loss: float) -> dict:
        return {}


def data_free(cfg, table: budget.Throughput):
    """The real workload class, built without reading data: what its data would supply (class count,
    vocabulary, dictionaries) is filled in from the configs and the table, so its own build_model,
    forward and loss run on synthetic batches. (Constructing the workload itself would read the data:
    the LM's text corpus is tokenised when the workload is built.)"""
    w = cfg.workload
    cls = workload_class(w.name)
    if w.name == "lm":
        source = _VocabOnly(w.spm_vocab_size)

        def __init__(self, cfg, seed):
            self.cfg, self.seed, self.data, self._val = cfg, seed, source, None
        return type("DataFree", (cls,), {"__init__": __init__})(w, 0)
    if w.name == "imagenet":
        return type("DataFree", (cls,), {"num_classes": 1000})(w, 0)    # ImageNet-1k
    if w.name == "translation":
        from fairseq.data import Dictionary
        facts = table.translation[f"{w.source_lang}-{w.target_lang}"]

        def dictionary(n):
            d = Dictionary()
            for i in range(n - len(d)):
                d.add_symbol(f"w{i}")
            return d
        src = dictionary(facts["source_dict"])
        tgt = src if w.share_embeddings == "all" else dictionary(facts["target_dict"])

        def _load(self):
            self.src_dict, self.tgt_dict, self._train = src, tgt, ()
        return type("DataFree", (cls,), {"_load": _load})(w, 0)
    return cls(w, 0)


def make_batch(cfg, workload, batch: int, table: budget.Throughput, device, step: int):
    """(inputs, targets) of the real shapes for one step."""
    import torch
    w = cfg.workload
    g = torch.Generator().manual_seed(step)
    if w.name in ("imagenet", "cifar"):
        size = w.image_size if w.name == "imagenet" else 32
        x = torch.randn(batch, 3, size, size, generator=g)
        y = torch.randint(0, workload.num_classes, (batch,), generator=g)
        return x.to(device), y.to(device)
    if w.name == "lm":
        tokens = torch.randint(0, workload.num_classes, (batch, w.seq_len + 1), generator=g)
        inputs = {"tokens": tokens[:, :-1], "stream": torch.arange(batch),
                  "segment": torch.full((batch,), step, dtype=torch.long)}   # carried state, as in training
        return {k: v.to(device) for k, v in inputs.items()}, tokens[:, 1:].to(device)
    if w.name == "ctr":
        from codist.workloads.ctr_config import CATEGORICAL_FEATURES, DENSE_FEATURES
        dense = torch.rand(batch, DENSE_FEATURES, generator=g) * 5
        ids = torch.randint(0, w.hash_buckets, (batch, CATEGORICAL_FEATURES), generator=g).float()
        return torch.cat([dense, ids], 1).to(device), torch.randint(0, 2, (batch,), generator=g).to(device)
    facts = table.translation[f"{w.source_lang}-{w.target_lang}"]
    s_len, t_len = round(facts["source_tokens_per_sentence"]), round(facts["target_tokens_per_sentence"])
    src_d, tgt_d = workload.src_dict, workload.tgt_dict
    low = src_d.nspecial
    src = torch.randint(low, len(src_d), (batch, s_len), generator=g)
    tgt = torch.randint(low, len(tgt_d), (batch, t_len), generator=g)
    src[:, -1], tgt[:, -1] = src_d.eos(), tgt_d.eos()
    prev = torch.cat([torch.full((batch, 1), tgt_d.eos()), tgt[:, :-1]], 1)
    inputs = {"src_tokens": src, "src_lengths": torch.full((batch,), s_len), "prev_output_tokens": prev}
    return {k: v.to(device) for k, v in inputs.items()}, tgt.to(device)


def units_per_sample(cfg, table) -> float:
    """Tokens per sample as the synthetic batch has them (the budget's mean, rounded), else 1."""
    w = cfg.workload
    if w.name == "translation":
        return float(round(table.translation[f"{w.source_lang}-{w.target_lang}"]["target_tokens_per_sentence"]))
    return budget.units_per_sample(cfg, table)


# --------------------------------------------------------------------------- one model, one precision

def bench(spec: Spec, precision: str, steps: int, warmup: int, device: str, table, batch: int | None = None,
          repeats: int = 3) -> dict:
    """One model's training rate: `repeats` timed blocks of `steps` steps after `warmup`; the rate is
    the blocks' median, their lowest and highest beside it (one block's number has no spread)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from codist.runtime.optim import build_optimizer

    cfg, batch = spec.cfg, batch or spec.batch
    workload = data_free(cfg, table)
    model = workload.build_model().to(device).train()
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16")

    # one synthetic batch on the device, reused: generating it per step would time the CPU's RNG
    inputs0, targets = make_batch(cfg, workload, batch, table, device, 0)

    def step(i):
        inputs = inputs0
        if cfg.workload.name == "lm":   # the next segment of each stream: the carried state is used
            inputs = {**inputs0, "segment": inputs0["segment"] + i}
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = workload.loss(workload.forward(model, inputs), targets)
        loss.backward()
        opt.step()

    with FlopCounterMode(display=False) as flops:   # one untimed step: training FLOPs per sample
        step(0)
    for i in range(1, warmup + 1):
        step(i)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats()
    blocks, i = [], warmup + 1
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(i, i + steps):
            step(i)
        sync()
        blocks.append(time.perf_counter() - t0)
        i += 1
    per_sample = units_per_sample(cfg, table)
    rates = sorted(steps * batch / b for b in blocks)   # samples/s of each block
    samples_s = statistics.median(rates)
    gflops = flops.get_total_flops() / batch / 1e9
    return {"samples_per_s": round(samples_s, 2), "units_per_s": round(samples_s * per_sample, 1),
            "units_per_s_min": round(rates[0] * per_sample, 1),
            "units_per_s_max": round(rates[-1] * per_sample, 1), "repeats": repeats,
            "units_per_sample": per_sample, "seconds": round(sum(blocks), 3), "batch_per_gpu": batch,
            "train_gflops_per_sample": round(gflops, 4), "achieved_tflops": round(gflops * samples_s / 1e3, 3),
            "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2 ** 30, 3) if device == "cuda" else ""}


def set_math(precision: str, device: str) -> dict:
    """Set the process's math backends as a run at `precision` (tf32, fp32 or bf16) sets them on
    `device` (a run's own function: TF32 on unless fp32, cuDNN autotuning; nothing on the CPU);
    returns what they are now (codist.runtime.cuda_defaults.backend_settings), for the row."""
    import torch

    from codist.runtime.cuda_defaults import backend_settings, configure_backends
    configure_backends(torch.device(device), tf32=precision != "fp32")
    return backend_settings()


def gpu_kind(device: str) -> tuple[str, str]:
    """(short kind for the budget, e.g. h200; the full device name)."""
    import platform

    import torch
    if device != "cuda":
        return "cpu", platform.processor() or platform.machine()
    name = torch.cuda.get_device_name()
    for kind in ("h200", "h100", "a100", "l40s", "a10", "v100"):
        if kind in name.lower():
            return kind, name
    return name.lower().replace("nvidia ", "").replace(" ", "-"), name


def reference(table, model: str, precision: str, gpu: str) -> list:
    """The table's rate for this GPU kind, else its A100 rate: [gpu, units/s, kind, source]."""
    for g in (gpu, "a100"):
        r = table.rate(model, g, precision)
        if r is not None:
            return [g, round(r.units_per_s, 1), r.kind, r.source.split(" ")[0]]   # the sources: key
    return ["", "", "", ""]


# --------------------------------------------------------------------------- two ranks: all-reduce and exchange

def _collective_worker(rank: int, world: int, backend: str, port: int, queue) -> None:
    import torch
    import torch.distributed as dist
    import torchvision

    from codist.algorithms.state import flat_state, load_flat_state
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    torch.manual_seed(rank)             # each rank's model differs: the exchange must carry rank 0's
    model = torchvision.models.resnet50().to(device)
    buf = flat_state(model)
    out = {}
    for name, fn in (("allreduce", lambda b: dist.all_reduce(b)), ("exchange", lambda b: dist.broadcast(b, src=0))):
        b = buf.clone()
        fn(b)                                    # warm-up
        dist.barrier()
        reps = 5 if backend == "nccl" else 1
        t0 = time.perf_counter()
        for _ in range(reps):
            b = buf.clone()
            fn(b)
        if backend == "nccl":
            torch.cuda.synchronize()
        out[name] = (time.perf_counter() - t0) / reps
    # the exchange as codistillation does it: rank 0's state broadcast, loaded into a teacher copy
    b = buf.clone()
    dist.broadcast(b, src=0)
    teacher = torchvision.models.resnet50().to(device)
    load_flat_state(teacher, b)
    # rank 1's own state differs (another seed): equal after loading means rank 0's arrived whole
    exact = torch.equal(flat_state(teacher), b) and not torch.equal(b, buf)
    if rank == 1:
        queue.put({"bytes": buf.numel() * buf.element_size(), "exact": exact, **out})
    dist.destroy_process_group()


def collectives(device: str, force: bool) -> list[str]:
    """Lines for the report (and the CSV's note rows): measured, or why skipped."""
    import socket

    import torch
    import torch.multiprocessing as mp
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    if device == "cuda" and gpus < 2:
        return [f"skip: the NCCL all-reduce and codistillation exchange need >= 2 GPUs; this machine has {gpus}"]
    if device == "cpu" and not force:
        return ["skip: the 2-rank checks run with --device cuda on >= 2 GPUs (or --collectives: gloo on CPU)"]
    backend = "nccl" if device == "cuda" else "gloo"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_collective_worker, args=(2, backend, port, queue), nprocs=2, start_method="spawn")
    r = queue.get()
    mb = r["bytes"] / 1e6
    return [f"{backend} 2 ranks: all-reduce of ResNet-50's state ({mb:.0f} MB): {r['allreduce'] * 1e3:.1f} ms "
            f"(bus bandwidth {mb / 1e3 / r['allreduce']:.1f} GB/s: 2(n-1)/n = 1 at n = 2)",
            f"{backend} 2 ranks: codistillation checkpoint exchange (flat_state broadcast, {mb:.0f} MB): "
            f"{r['exchange'] * 1e3:.1f} ms, teacher loaded bit-exact: {r['exact']}"]


# --------------------------------------------------------------------------- main

def write_csv(out: Path, columns: list[str], rows: list[dict]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out} ({len(rows)} rows)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--steps", type=int, default=200, help="timed steps per block, model and precision")
    p.add_argument("--repeats", type=int, default=3, help="timed blocks per model and precision: the rate is "
                   "their median, their range beside it")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: steps/10, >= 1 on cuda)")
    p.add_argument("--batch", type=int, default=None, help="override every batch per GPU (the CPU smoke run)")
    p.add_argument("--models", default="", help="comma-separated model names (default: every full-scale model)")
    p.add_argument("--precisions", default="tf32,bf16",
                   help="of tf32 (a run's fp32 with train.tf32, the default), fp32 (train.tf32: false), bf16")
    p.add_argument("--collectives", action="store_true", help="on CPU too: the 2-rank checks over gloo")
    p.add_argument("--out", default=str(ROOT / "results" / "bench" / "gpu_throughput.csv"))
    p.add_argument("--replications", default=str(ROOT / "replications"))
    p.add_argument("--throughput", default=str(ROOT / "replications" / "throughput.yaml"))
    args = p.parse_args(argv)
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); "
              "the CPU smoke run is --device cpu --steps 2 --batch 2", file=sys.stderr)
        return 2
    precisions = args.precisions.split(",")
    if set(precisions) - set(budget.RATE_PRECISIONS):
        print(f"gpu-check: --precisions {args.precisions!r}: each one of {', '.join(budget.RATE_PRECISIONS)}",
              file=sys.stderr)
        return 2
    table = budget.load_throughput(args.throughput)
    specs = full_specs(Path(args.replications))
    wanted = [m for m in args.models.split(",") if m]
    unknown = set(wanted) - {s.model for s in specs}
    if unknown:
        print(f"gpu-check: --models {sorted(unknown)}: not a full-scale model; known: "
              f"{', '.join(sorted({s.model for s in specs}))}", file=sys.stderr)
        return 2
    specs = [s for s in specs if not wanted or s.model in wanted]
    warmup = args.warmup if args.warmup is not None else max(args.device == "cuda", args.steps // 10)
    gpu, name = gpu_kind(args.device)
    date = datetime.date.today().isoformat()
    rows, failed = [], 0
    for spec in specs:
        for precision in precisions:
            t0 = time.perf_counter()
            ref = reference(table, spec.model, precision, gpu)
            math = set_math(precision, args.device)
            try:
                r = bench(spec, precision, args.steps, warmup, args.device, table, args.batch, args.repeats)
                error = ""
            except Exception as e:   # one model's failure (e.g. out of memory) must not lose the others' rows
                r = {k: "" for k in ("batch_per_gpu", "units_per_sample", "seconds", "samples_per_s", "units_per_s",
                                     "units_per_s_min", "units_per_s_max", "repeats", "peak_mem_gib",
                                     "train_gflops_per_sample", "achieved_tflops")}
                error, failed = f"{type(e).__name__}: {e}".replace("\n", " ")[:300], failed + 1
            rows.append(dict(zip(COLUMNS, [spec.model, gpu, args.device, name, precision,
                                           math["float32_matmul_precision"], math["cudnn_allow_tf32"],
                                           r["batch_per_gpu"] or args.batch or spec.batch,
                                           table.units[spec.model], r["units_per_sample"], args.steps,
                                           r["repeats"] or args.repeats, r["seconds"], r["samples_per_s"],
                                           r["units_per_s"], r["units_per_s_min"], r["units_per_s_max"],
                                           r["peak_mem_gib"],
                                           r["train_gflops_per_sample"], r["achieved_tflops"], *ref,
                                           torch.__version__, date, error])))
            took = f"[{time.perf_counter() - t0:.1f} s]"
            if error:
                print(f"{spec.model:>34} {precision}: FAILED {error} {took}", flush=True)
                continue
            print(f"{spec.model:>34} batch {r['batch_per_gpu']:>4} {precision}: {r['units_per_s']:>12,.1f} "
                  f"[{r['units_per_s_min']:,.1f}, {r['units_per_s_max']:,.1f}] {table.units[spec.model]}s/s  "
                  f"peak {r['peak_mem_gib'] or '-'} GiB  "
                  f"(reference {ref[0] or '-'} {ref[1] or '-'})  {took}", flush=True)
    out = Path(args.out)
    write_csv(out, COLUMNS, rows)
    try:
        for line in collectives(args.device, args.collectives):
            print(line, flush=True)
    except Exception as e:   # an NCCL failure is a finding: say it after the throughput rows are safe
        print(f"2-rank checks FAILED: {type(e).__name__}: {e}", flush=True)
        failed += 1
    if failed:
        print(f"gpu-check: {failed} model/precision pair(s) failed (the error column of {out})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
