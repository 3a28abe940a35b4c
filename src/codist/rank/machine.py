"""What a lab logs beside each evaluation row: the machine's measurements of the interval since
the row's model's previous row (a resumed run's previous row is its checkpoint's, so the interval
spans both processes' training time).

- `samples_per_s`: the row's `samples` gained over the training seconds (`wall_s`) gained;
  `tokens_per_s` too where the workload registers units per sample (the budget's definition,
  codist.budget.units_per_sample: the LM's seq_len, translation's mean target length of the pair's
  data set, an estimate); None where the table lacks what it needs.
- `mfu`: model FLOPs per second over the dense peak of the devices of the row's model's group. The
  FLOPs are counted, not estimated: one real update of rank 0 under torch.utils.flop_counter's
  FlopCounterMode (as benchmarks/efficiency.py and gpu_check.py count them: its forward, backward
  and teachers' forwards), divided by the rank's batch. The peak comes from PEAK_TFLOPS, by the CUDA
  device's name and the run's math (codist.budget.rate_precision). Nothing is counted, and `mfu` is
  None, where the peak is unknown (a CPU, a GPU not in the table), under `train.compile`, or for a
  model with a fused RNN kernel, which the counter has no formula for.
- `peak_mem_mb`: on CUDA rank 0's torch.cuda.max_memory_allocated since the previous row (reset
  after each row); on a CPU rank 0's peak resident set size (ru_maxrss), over the process's life.

All are rank 0's clock and memory, depend on the machine, and are named so that comparisons leave
them out (codist.runlog.machine_column).
"""
from __future__ import annotations

import contextlib
import resource
import sys

import torch

from .. import budget
from ..workloads import spec

# Dense (no structured sparsity) peak TFLOP/s by the run's math, keyed by torch.cuda.get_device_name.
# fp16 tensor cores run at the bf16 rate on these GPUs. NVIDIA's datasheets state the TF32, BF16 and
# FP16 tensor-core numbers with sparsity; the dense ones are half.
PEAK_TFLOPS = {
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), H100 SXM column:
    # FP32 67, TF32 989*, BF16 1,979*, FP16 1,979* (* with sparsity)
    "NVIDIA H100 80GB HBM3": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
    # same datasheet, H100 PCIe column: FP32 51, TF32 756*, BF16 1,513*, FP16 1,513*
    "NVIDIA H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5},
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), H200 SXM column:
    # FP32 67, TF32 989*, BF16 1,979*, FP16 1,979* (* with sparsity)
    "NVIDIA H200": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), every A100 40/80 GB,
    # SXM and PCIe: FP32 19.5, TF32 156 (312*), BF16 312 (624*), FP16 312 (624*)
    **{name: {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}
       for name in ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB",
                    "NVIDIA A100 80GB PCIe")},
}


def peak_flops(device_name: str, math: str) -> float | None:
    """The dense peak FLOP/s of one device called `device_name` at `math` (fp32, tf32, bf16, fp16);
    None for a device or math the table does not know."""
    tflops = PEAK_TFLOPS.get(device_name.strip(), {}).get(math)
    return None if tflops is None else tflops * 1e12


def peak_memory_mb(device: torch.device) -> float:
    """Rank 0's peak memory: the CUDA allocator's since its last reset, else the process's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2 ** 20 if sys.platform == "darwin" else rss / 2 ** 10   # bytes on macOS, KiB on Linux


def run_units_per_sample(cfg) -> float | None:
    """Tokens per sample where the workload registers them (None: its units are samples, or the
    throughput table lacks its data set's length)."""
    if spec(cfg.workload.name).units_per_sample is None:
        return None
    try:
        return budget.units_per_sample(cfg, budget.load_throughput(budget.THROUGHPUT))
    except budget.BudgetError:
        return None


class Machine:
    """Rank 0's measurements of each logging interval; `columns` gives a row's."""

    def __init__(self, cfg, device: torch.device, model: torch.nn.Module, ranks_per_model: int):
        self.device, self.batch = device, cfg.train.batch_per_rank
        self.units = run_units_per_sample(cfg)
        peak = None
        if device.type == "cuda":
            peak = peak_flops(torch.cuda.get_device_name(device), budget.rate_precision(cfg, cfg.train.precision))
        fused_rnn = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
        self.group_peak = None if peak is None or cfg.train.compile or fused_rnn else peak * ranks_per_model
        self.flops_per_sample = None   # counted on this process's first update (`counting`)

    @contextlib.contextmanager
    def counting(self):
        """Around an update: the first time, where the FLOPs are wanted, count its model FLOPs per sample."""
        if self.group_peak is None or self.flops_per_sample is not None:
            yield
            return
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as counter:
            yield
        self.flops_per_sample = counter.get_total_flops() / self.batch

    def columns(self, previous: dict | None, samples: int, wall_s: float) -> dict:
        """The machine's columns of a row with `samples` and `wall_s`, `previous` the row's model's
        previous row (None: the first)."""
        seconds = wall_s - (previous["wall_s"] if previous else 0.0)
        rate = (samples - (previous["samples"] if previous else 0)) / seconds if seconds > 0 else None
        mfu = None
        if rate is not None and self.group_peak and self.flops_per_sample:
            mfu = rate * self.flops_per_sample / self.group_peak
        out = {"samples_per_s": None if rate is None else round(rate, 3)}
        if self.units is not None:
            out["tokens_per_s"] = None if rate is None else round(rate * self.units, 3)
        return {**out, "mfu": None if mfu is None else float(f"{mfu:.4g}"),   # significant digits: a small model's is tiny
                "peak_mem_mb": round(peak_memory_mb(self.device), 1)}

    def interval_done(self) -> None:
        """After an evaluation's rows: the next interval's CUDA peak starts from here."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
