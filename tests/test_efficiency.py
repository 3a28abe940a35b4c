"""benchmarks/efficiency.py: a row timed at load >= 2 is never written; the LSTM's fused layer is counted
as its GEMMs; the rows cover every embedded workload."""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import benchlib, efficiency


def test_refuse_loaded_keeps_only_quiet_rows():
    rows = [{"model": "a", "batch": 1, "loadavg": 1.99}, {"model": "b", "batch": 2, "loadavg": 2.0},
            {"model": "c", "batch": 3, "loadavg": 7.5}, {"model": "d", "batch": 4}]
    kept, refused = benchlib.refuse_loaded(rows)
    assert [r["model"] for r in kept] == ["a"]
    assert len(refused) == 3 and all("refused, not written" in line for line in refused)
    assert "load average 2.0" in refused[0] and "load average None" in refused[2]


def test_a_row_timed_under_load_is_not_written(tmp_path, monkeypatch, capsys):
    """Through main(): one quiet row and one at load 2.4; the csv holds the quiet one, rc 1 says so."""
    rows = [{"workload": {"name": "lm"}, "batch": 32, "optimizer": {}, "used_by": "x"},
            {"workload": {"name": "lm"}, "batch": 64, "optimizer": {}, "used_by": "y"}]
    monkeypatch.setattr(efficiency, "plan_rows", lambda: rows)
    load = {32: 0.7, 64: 2.4}
    monkeypatch.setattr(efficiency, "run_row", lambda row, precision: {
        "workload": "lm", "model": "lm", "batch": row["batch"], "precision": precision, "workload_config": "{}",
        "codist_s_per_update": 0.01, "codist_gflops": 1.0, "ratio_to_fp32_peak": 0.1, "gemm_fp32_gflops": 10.0,
        "loadavg": load[row["batch"]]})
    assert efficiency.main(["--out", str(tmp_path)]) == 1
    import pandas as pd
    table = pd.read_csv(tmp_path / "efficiency.csv")
    assert table.batch.tolist() == [32]
    assert "batch 64: load average 2.4" in capsys.readouterr().err


def test_lstm_layer_counted_as_its_gemms():
    """2 x tokens x 4H x (I + H) forward, twice that backward, for either layout."""
    torch.manual_seed(0)
    tokens, i, h = 8 * 16, 32, 64
    for lstm, x in ((torch.nn.LSTM(i, h, batch_first=True), torch.randn(8, 16, i)),
                    (torch.nn.LSTM(i, h), torch.randn(16, 8, i))):
        with FlopCounterMode(display=False, custom_mapping=efficiency.lstm_flops(torch)) as counter:
            y, _ = lstm(x.requires_grad_())
            y.sum().backward()
        assert counter.get_total_flops() == 3 * 2 * tokens * 4 * h * (i + h)


def test_rows_cover_every_embedded_workload():
    rows = efficiency.plan_rows()
    assert {r["workload"]["name"] for r in rows} == {"lm", "cifar", "imagenet", "ctr", "translation"}
    keys = [(efficiency.describe(r["workload"]), r["batch"]) for r in rows]
    assert len(keys) == len(set(keys)), "a row differing only in the data set's size is measured once"


def test_lm_levers_keeps_other_cpus_rows_and_reads_each_variant_against_fused_fp32(tmp_path, monkeypatch):
    """benchmarks/lm_levers.py through main(): a run replaces its (cpu, batch, variant) rows and keeps
    another CPU's; speedup is fused-fp32's s/update over the variant's on the same CPU and batch; a row
    timed at load >= 2 is refused."""
    import pandas as pd

    from benchmarks import lm_levers
    pd.DataFrame([{"cpu": "other", "batch": 8192, "variant": "fused-fp32", "s_per_update": 4.0, "loadavg": 0.5},
                  {"cpu": "other", "batch": 8192, "variant": "unrolled-fp32", "s_per_update": 8.0, "loadavg": 0.5}]
                 ).to_csv(tmp_path / "lm_levers.csv", index=False)
    seconds = {"fused-fp32": 6.0, "unrolled-fp32": 3.0, "fused-bf16": 2.0}
    load = {"fused-fp32": 1.0, "unrolled-fp32": 1.2, "fused-bf16": 2.5}
    monkeypatch.setattr(lm_levers, "lm_row", lambda batch: {"batch": batch})
    monkeypatch.setattr(lm_levers, "measure", lambda row, variant, flops: {
        "cpu": "this", "batch": row["batch"], "variant": variant, "s_per_update": seconds[variant], "flops_per_update": 1e9,
        "gflops": 1e9 / seconds[variant] / 1e9, "ratio_to_fp32_peak": 0.1, "gemm_fp32_gflops": 10.0,
        "ratio_to_gemm_mix": 0.5, "gemm_mix_gflops": 2.0, "loadavg": load[variant]})
    assert lm_levers.main(["--batches", "8192", "--variants", "fused-fp32", "unrolled-fp32", "fused-bf16",
                           "--out", str(tmp_path)]) == 1   # the bf16 row was refused
    table = pd.read_csv(tmp_path / "lm_levers.csv").set_index(["cpu", "variant"])
    assert sorted(table.index) == [("other", "fused-fp32"), ("other", "unrolled-fp32"),
                                   ("this", "fused-fp32"), ("this", "unrolled-fp32")]
    assert table.loc[("this", "unrolled-fp32"), "speedup"] == 2.0
    assert table.loc[("other", "unrolled-fp32"), "speedup"] == 0.5


def test_lm_levers_gemm_mix_is_the_update_the_counter_counts():
    """lm_levers.lm_gemms, the GEMMs whose rate at the LM's own shapes bounds the LM, add up to the FLOPs
    FlopCounterMode counted on one real update of the fused LM (efficiency.csv, every LM batch): the same
    work, shape by shape; and gemm_mix times them (a tiny list, so the test is quick)."""
    import pandas as pd
    import torch

    from benchmarks import efficiency, lm_levers
    counted = pd.read_csv(efficiency.ROOT / "results" / "bench" / "efficiency.csv")
    counted = counted[(counted.workload == "lm") & (counted.precision == "fp32")]
    rows = {r["batch"]: r for r in efficiency.plan_rows() if r["workload"]["name"] == "lm"}
    assert len(counted) >= 5
    for batch, flops in zip(counted.batch, counted.flops_per_update):
        gemms = lm_levers.lm_gemms(rows[batch]["workload"], batch)
        assert sum(2 * m * k * n * times for m, k, n, times in gemms) == flops, batch
    assert lm_levers.gemm_mix(torch, torch.float32, [(64, 32, 16, 3)]) > 0


def test_a_quiet_rerun_replaces_its_rows_and_keeps_the_others(tmp_path):
    """benchlib.replace_rows: the rows a rerun measured replace the table's rows of the same key, the
    others stay, in one clean index; an empty rerun keeps every row (issue 52's mutation run: both
    survived the earlier tests)."""
    import pandas as pd

    from benchmarks.benchlib import replace_rows
    path = tmp_path / "t.csv"
    pd.DataFrame({"model": ["a", "b"], "batch": [1, 1], "rate": [1.0, 2.0]}).to_csv(path, index=False)
    new = pd.DataFrame({"model": ["a"], "batch": [1], "rate": [9.0]})
    got = replace_rows(path, new, ["model", "batch"])
    assert sorted(zip(got.model, got.rate)) == [("a", 9.0), ("b", 2.0)]
    assert list(got.index) == list(range(len(got)))
    kept = replace_rows(path, new.iloc[0:0], ["model", "batch"])
    assert sorted(zip(kept.model, kept.rate)) == [("a", 1.0), ("b", 2.0)]
