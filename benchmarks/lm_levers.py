"""The LM's levers at the batches where sync SGD saturates (issue 50 item 1): seconds per update of
codist's own loop for each way to run the same model, each in a fresh process (one rank, 1 thread,
efficiency.measure), so a tier can be sized from the fastest one that keeps the verdicts.

    python benchmarks/lm_levers.py [--batches 8192 16384] [--variants fused-fp32 ...] [--out results/bench]

Variants (the model, data and optimizer of efficiency.py's LM row; only the kernel, precision,
compilation and allocator differ):
- fused-fp32: torch.nn.LSTM (oneDNN on a CPU), fp32: what every committed LM run uses;
- fused-bf16: the same under train.precision bf16 (autocast);
- unrolled-fp32: workload.lstm unrolled (lm.UnrolledLSTM: the same cell as torch code), eager;
- unrolled-fp32-compiled: the same with train.compile (torch.compile fuses the gates' elementwise work;
  it refuses nn.LSTM, so the fused kernel has no compiled variant);
- unrolled-bf16-compiled: and under bf16 autocast (not by default: about 30 s an update on a CPU
  without AMX, where bf16 runs in software);
- fused-fp32-reuse, unrolled-fp32-compiled-reuse, fused-bf16-reuse, unrolled-bf16-compiled-reuse: those
  with launch.allocator reuse (glibc keeps large blocks in its heap instead of mapping fresh pages each
  update: codist.runtime.allocator).

Each row also carries the measuring process's peak RSS (the allocator's price), and the rate its own
GEMMs reach at the LM's own shapes, in isolation and in the row's precision (`gemm_mix_gflops`, gemm_mix):
the square-GEMM peak assumes a compute-bound kernel, and the LM's GEMMs are skinny (inner sizes 32-256
over batch x 32 tokens), so their rate is bound by memory, not by the peak.

GFLOP/s use the fused fp32 row's counted FLOPs at that batch (the same model's GEMMs: FlopCounterMode
does not see inside compiled code), against the same process's fp32 and bf16 GEMM peaks. A row is
refused at a load average >= benchlib.QUIET_LOAD, as in efficiency.py. Writes
results/bench/lm_levers.csv; a run replaces the rows of its (cpu, batch, variant) and keeps the others,
so rows of different CPUs stand side by side, each with its own peaks (a variant's gain is read against
fused-fp32 of the same CPU and batch).
"""
from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks import benchlib, efficiency
from codist.runlog import cpu_model

VARIANTS = {   # name: (workload.lstm, train.precision, train.compile, launch.allocator)
    "fused-fp32": ("fused", "fp32", False, "system"),
    "fused-bf16": ("fused", "bf16", False, "system"),
    "unrolled-fp32": ("unrolled", "fp32", False, "system"),
    "unrolled-fp32-compiled": ("unrolled", "fp32", True, "system"),
    "unrolled-bf16-compiled": ("unrolled", "bf16", True, "system"),
    "fused-fp32-reuse": ("fused", "fp32", False, "reuse"),
    "unrolled-fp32-compiled-reuse": ("unrolled", "fp32", True, "reuse"),
    "fused-bf16-reuse": ("fused", "bf16", False, "reuse"),
    "unrolled-bf16-compiled-reuse": ("unrolled", "bf16", True, "reuse"),
}
DEFAULT_VARIANTS = ["fused-fp32", "fused-bf16", "unrolled-fp32", "unrolled-fp32-compiled", "fused-fp32-reuse",
                    "unrolled-fp32-compiled-reuse"]
KEY = ["cpu", "batch", "variant"]


def lm_row(batch: int) -> dict:
    """efficiency.py's LM row at `batch` (its workload section and optimizer), timed without the plain loop."""
    row = next((r for r in efficiency.plan_rows() if r["workload"]["name"] == "lm" and r["batch"] == batch), None)
    if row is None:
        raise SystemExit(f"lm_levers: efficiency.py has no LM row at batch {batch} (its EXTRA_BATCHES give the others)")
    return {**row, "plain": False}


def lm_gemms(cfg: dict, batch: int) -> list[tuple[int, int, int, int]]:
    """(m, k, n, times) of each GEMM an update of the LM does, (m x k) @ (k x n), for the embedded LM's
    workload section `cfg`: per LSTM layer the input projection over all tokens and the recurrent one per
    step, their input and weight gradients, and the output layer's three; as the fused fp32 row counts them."""
    tokens, steps = batch * cfg["seq_len"], cfg["seq_len"]
    hidden, vocab = cfg["hidden"], cfg["vocab"]
    gates, out = 4 * hidden, []
    for size in [cfg["embedding"]] + [hidden] * (cfg["layers"] - 1):
        out += [(tokens, size, gates, 1), (batch, hidden, gates, steps),              # forward
                (tokens, gates, size, 1), (gates, tokens, size, 1),                   # input, W_ih gradients
                (batch, gates, hidden, steps), (gates, tokens, hidden, 1)]            # h, W_hh gradients
    return out + [(tokens, hidden, vocab, 1), (tokens, vocab, hidden, 1), (vocab, tokens, hidden, 1)]


def gemm_mix(torch, dtype, gemms: list[tuple[int, int, int, int]], reps: int = 3) -> float:
    """GFLOP/s of `gemms` (lm_gemms) run one by one on this thread: their FLOPs over the sum of each one's
    best time (of `reps`) times its count."""
    flops = seconds = 0.0
    for m, k, n, times in gemms:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        a @ b   # the kernel's selection, its buffers
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        flops, seconds = flops + 2 * m * k * n * times, seconds + best * times
    return flops / seconds / 1e9


@functools.cache
def lm_gemm_rate(precision: str, batch: int, workload: str) -> float:
    """gemm_mix of the LM's GEMMs (`workload`: its section as JSON) in `precision`, timed once a
    (precision, batch) in this process, on one thread as the child ran: the variants share it."""
    import torch
    torch.set_num_threads(1)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    return gemm_mix(torch, dtype, lm_gemms(json.loads(workload), batch))


def measure(row: dict, variant: str, flops: float | None) -> dict:
    """One variant of efficiency.py's LM `row` (lm_row), timed in a fresh process."""
    lstm, precision, compile_, allocator = VARIANTS[variant]
    batch = row["batch"]
    row = {**row, "workload": {**row["workload"], "lstm": lstm}, "compile": compile_, "allocator": allocator}
    before = benchlib.loadavg()
    got = efficiency.measure_child(row, precision)
    flops = flops or got["flops_per_update"]
    gflops = flops / got["codist_s_per_update"] / 1e9
    mix = lm_gemm_rate(precision, batch, json.dumps(row["workload"], sort_keys=True))
    return {"cpu": cpu_model(), "batch": batch, "variant": variant, "lstm": lstm, "precision": precision,
            "compile": compile_, "allocator": allocator, "s_per_update": got["codist_s_per_update"],
            "updates_timed": got["codist_updates_timed"], "peak_rss_mib": got["peak_rss_mib"],
            "flops_per_update": flops, "gflops": gflops,
            "ratio_to_fp32_peak": gflops / got["gemm_fp32_gflops"], "ratio_to_bf16_peak": gflops / got["gemm_bf16_gflops"],
            "gemm_fp32_gflops": got["gemm_fp32_gflops"], "gemm_bf16_gflops": got["gemm_bf16_gflops"],
            "gemm_mix_gflops": mix, "ratio_to_gemm_mix": gflops / mix,
            "threads": got["threads"], "loadavg_before": before, "loadavg": max(before, benchlib.loadavg()),
            "torch": got["torch"], "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def with_speedups(table: pd.DataFrame) -> pd.DataFrame:
    """speedup: fused-fp32's seconds per update over the variant's, same CPU and batch (NaN without one)."""
    base = table[table.variant == "fused-fp32"].set_index(["cpu", "batch"])["s_per_update"]
    ref = [base.get((c, b), float("nan")) for c, b in zip(table.cpu, table.batch)]
    return table.assign(speedup=[r / s for r, s in zip(ref, table.s_per_update)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", nargs="+", type=int, default=[8192, 16384])
    p.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=sorted(VARIANTS))
    p.add_argument("--out", default=str(benchlib.ROOT / "results" / "bench"))
    args = p.parse_args(argv)
    variants = sorted(set(args.variants), key=list(VARIANTS).index)
    measured, refused, failed = [], [], []
    for batch in args.batches:
        flops, row = None, lm_row(batch)   # the plan read once a batch, not once a variant
        for variant in (["fused-fp32"] + [v for v in variants if v != "fused-fp32"]):
            try:
                got = measure(row, variant, flops)
            except SystemExit as e:   # a variant this CPU cannot run (oneDNN has no bf16 LSTM without AVX512-BF16)
                failed.append(f"lm batch {batch} {variant}: failed, no row: {str(e).strip().splitlines()[-1]}")
                print(failed[-1], file=sys.stderr, flush=True)
                continue
            flops = flops or got["flops_per_update"]   # the fused fp32 row's count for every variant
            print(f"lm batch {batch} {variant}: {got['s_per_update']:.3f} s/update, {got['gflops']:.1f} GFLOP/s = "
                  f"{got['ratio_to_fp32_peak']:.0%} of fp32 peak {got['gemm_fp32_gflops']:.0f}, "
                  f"{got['ratio_to_gemm_mix']:.0%} of its GEMMs' rate at its shapes {got['gemm_mix_gflops']:.0f} "
                  f"(load {got['loadavg']})",
                  flush=True)
            if variant not in variants:   # measured only for its FLOP count and as the reference
                continue
            kept, why = benchlib.refuse_loaded([got])
            measured += kept
            refused += why
    table = benchlib.replace_rows(Path(args.out) / "lm_levers.csv", pd.DataFrame(measured), KEY)
    if "allocator" in table:   # rows written before the allocator variants ran on the system allocator
        table["allocator"] = table["allocator"].fillna("system")
    if len(table):
        benchlib.write_csv(with_speedups(table).sort_values(KEY), args.out, "lm_levers.csv")
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused or failed else 0


if __name__ == "__main__":
    sys.exit(main())
