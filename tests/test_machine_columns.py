"""What a lab logs (issue 51): each metrics row's throughput, model-FLOPs utilisation and peak memory
over its interval (codist.rank.machine), named so that comparisons leave them out."""
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import TINY, launch_run, read_rows

from codist import config
from codist.rank import machine
from codist.runlog import machine_column, without_machine_columns

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
import compare  # noqa: E402

MACHINE = ("samples_per_s", "mfu", "peak_mem_mb")


@pytest.mark.slow
def test_a_cpu_runs_rows_carry_throughput_and_peak_memory(tmp_path):
    rows = read_rows(launch_run(tmp_path / "run", {}))
    assert [r["step"] for r in rows] == [3, 6]
    for r in rows:
        assert r["samples_per_s"] > 0 and r["peak_mem_mb"] > 0
        assert r["mfu"] is None or 0 < r["mfu"] <= 1   # a CPU's peak is unknown: null
        assert "tokens_per_s" not in r   # images: the workload registers no units per sample
    # the interval's: the second row's samples over its own seconds, not the run's so far
    second = (rows[1]["samples"] - rows[0]["samples"]) / (rows[1]["wall_s"] - rows[0]["wall_s"])
    assert rows[1]["samples_per_s"] == pytest.approx(second, rel=1e-3)


def test_the_units_are_the_budgets():
    lm = config.validate({**TINY, "workload": {"name": "lm", "seq_len": 12}}, "lm")
    assert machine.run_units_per_sample(lm) == 12.0
    assert machine.run_units_per_sample(config.validate(TINY, "cifar")) is None


def test_the_cuda_peak_is_looked_up_by_device_name_and_math():
    assert machine.peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989.5e12
    assert machine.peak_flops("NVIDIA H200", "tf32") == 494.5e12
    assert machine.peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5e12
    assert machine.peak_flops("NVIDIA A100-SXM4-80GB", "bf16") == 312e12
    assert machine.peak_flops("NVIDIA GeForce RTX 4090", "bf16") is None   # unknown: no guess
    assert machine.peak_flops("NVIDIA H100 80GB HBM3", "int8") is None


def test_mfu_is_counted_model_flops_per_second_over_the_groups_peak():
    cfg = config.validate(TINY, "tiny")
    m = machine.Machine(cfg, torch.device("cpu"), torch.nn.Linear(10, 5), ranks_per_model=2)
    assert m.group_peak is None and m.columns(None, 32, 1.0)["mfu"] is None   # a CPU: unknown
    m.group_peak, m.batch = 2 * 1e3, 4   # as a known device's would be
    model, x = torch.nn.Linear(10, 5, bias=False), torch.randn(4, 10)
    with m.counting():
        model(x).sum().backward()
    assert m.flops_per_sample == 2 * 2 * 10 * 5   # forward 2 x 10 x 5 a sample, the weight's gradient as much
    cols = m.columns({"samples": 32, "wall_s": 1.0}, 64, 3.0)   # 32 samples in 2 s
    assert cols["samples_per_s"] == 16 and cols["mfu"] == pytest.approx(16 * 200 / 2e3)
    with m.counting():   # counted once
        model(x).sum().backward()
    assert m.flops_per_sample == 200


def test_the_machines_columns_are_never_compared():
    assert all(machine_column(c) for c in (*MACHINE, "tokens_per_s", "wall_s", "wall_s_to_target"))
    assert not any(machine_column(c) for c in ("samples", "val_accuracy", "comm_bytes", "steps", "step"))
    row = {"step": 3, "samples": 48, "wall_s": 0.5, "val_accuracy": 0.5, "samples_per_s": 96.0, "mfu": None,
           "peak_mem_mb": 300.0}
    assert without_machine_columns(row) == {"step": 3, "samples": 48, "val_accuracy": 0.5}
    curves = pd.DataFrame([{**row, "series": "a", "seed": s, "val_accuracy": 0.5 + s / 100} for s in range(3)])
    other = curves.assign(samples_per_s=[10.0, 11.0, 12.0], mfu=0.3, peak_mem_mb=9000.0, tokens_per_s=1.0)
    assert compare.judge_table(curves, other) == ("bit-identical", [])
    older = curves.drop(columns=list(MACHINE))   # a committed run logged before the columns existed
    assert compare.judge_table(older, curves) == ("bit-identical", [])
    assert compare.judge_table(curves, curves.assign(val_accuracy=0.9))[0] != "bit-identical"
