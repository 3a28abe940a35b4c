"""benchmarks/gpu_check.py (`make gpu-check`): the CPU smoke run of its code path, every full-scale model
built data-free by its real builder, the 2-rank exchange over gloo; on a CUDA machine (marker `cuda`)
the same on the GPU and over NCCL (run on one H200, 2026-12-04: the 2-GPU NCCL test has not run)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

from codist import budget  # noqa: E402
from torch_backends import restore_backends  # noqa: E402, F401  (a fixture)

TABLE = budget.load_throughput(ROOT / "replications" / "throughput.yaml")


@pytest.fixture(scope="module")
def specs():
    return gpu_check.full_specs(ROOT / "replications")


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_specs_cover_every_full_scale_model(specs):
    assert {s.model for s in specs} == {"resnet50", "resnext101_32x8d", "lstm_lm", "ctr_mlp", "cifar_resnet20",
                                        "transformer_vaswani_wmt_en_de_big"}
    for s in specs:   # each has a throughput unit and a published or derived A100 reference
        assert TABLE.rate(s.model, "a100", "tf32") is not None, s.model


def test_cpu_smoke_run(tmp_path):
    out = tmp_path / "gpu.csv"
    assert gpu_check.main(["--device", "cpu", "--steps", "2", "--batch", "2", "--models", "cifar_resnet20",
                           "--out", str(out)]) == 0
    got = rows(out)
    assert [(r["model"], r["precision"], r["device"]) for r in got] == [
        ("cifar_resnet20", "tf32", "cpu"), ("cifar_resnet20", "bf16", "cpu")]
    for r in got:
        assert float(r["units_per_s"]) > 0 and r["error"] == ""
        # the rate is the median of 3 timed blocks, their range beside it (issue 51, G6: one block has no spread)
        assert r["repeats"] == "3" and r["steps"] == "2"
        assert 0 < float(r["units_per_s_min"]) <= float(r["units_per_s"]) <= float(r["units_per_s_max"])
        # counted training FLOPs = 3 x forward (2 FLOPs per MAC) of the table's MAC count, within 5%
        assert float(r["train_gflops_per_sample"]) == pytest.approx(6 * 40.55e6 / 1e9, rel=0.05)
        assert r["reference_gpu"] == "a100" and r["reference_kind"] == "derived"
    # cpu rows are never read as measured GPU rates
    assert budget.add_measured(TABLE, out) == []


def test_each_precision_is_timed_under_the_math_a_run_sets(tmp_path, monkeypatch, restore_backends):
    """On a GPU (checked at the boundary: torch's flags without one, the timing itself replaced) the
    tf32 rows run with TF32 matmuls and convolutions as a run's default (train.tf32) does, the fp32
    rows with neither, bf16 with TF32 on; each row records it, and the budget reads the rows as the
    rates of those maths. Before, every row ran with torch's defaults (fp32 matmuls, TF32
    convolutions) and its "fp32" priced the runs, which use TF32."""
    seen = []

    def bench(spec, precision, *args, **kw):
        seen.append((precision, torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32))
        rate = 100.0 if precision == "fp32" else 300.0
        return {"samples_per_s": 1.0, "units_per_s": rate, "units_per_s_min": rate, "units_per_s_max": rate,
                "repeats": 3, "units_per_sample": 1.0, "seconds": 1.0, "batch_per_gpu": 8,
                "train_gflops_per_sample": 1.0, "achieved_tflops": 1.0, "peak_mem_gib": 1.0}
    monkeypatch.setattr(gpu_check, "bench", bench)
    monkeypatch.setattr(gpu_check, "gpu_kind", lambda device: ("h200", "NVIDIA H200"))
    monkeypatch.setattr(gpu_check, "collectives", lambda device, force: [])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    torch.set_float32_matmul_precision("highest")   # torch's defaults, as a fresh process has them
    torch.backends.cudnn.allow_tf32 = True
    out = tmp_path / "gpu.csv"
    assert gpu_check.main(["--device", "cuda", "--models", "cifar_resnet20", "--precisions", "tf32,fp32,bf16",
                           "--out", str(out)]) == 0
    assert seen == [("tf32", "high", True), ("fp32", "highest", False), ("bf16", "high", True)]
    assert [(r["precision"], r["float32_matmul_precision"], r["cudnn_allow_tf32"]) for r in rows(out)] == [
        ("tf32", "high", "True"), ("fp32", "highest", "False"), ("bf16", "high", "True")]
    table = budget.load_throughput(ROOT / "replications" / "throughput.yaml")
    assert budget.add_measured(table, out) == ["h200"]
    assert table.rate("cifar_resnet20", "h200", "tf32").units_per_s == 300.0   # what the plan's fp32 runs use
    assert table.rate("cifar_resnet20", "h200", "fp32").units_per_s == 100.0   # train.tf32: false only
    assert gpu_check.main(["--device", "cpu", "--precisions", "fp16", "--out", str(tmp_path / "x.csv")]) == 2


def test_unknown_model_is_one_line(tmp_path, capsys):
    assert gpu_check.main(["--device", "cpu", "--models", "resnet51", "--out", str(tmp_path / "x.csv")]) == 2
    assert "--models ['resnet51']: not a full-scale model; known: cifar_resnet20" in capsys.readouterr().err


def test_image_lm_ctr_models_build_data_free_with_the_real_shapes(specs):
    """On the meta device (no memory, no compute): builder, synthetic batch, forward and loss agree."""
    want = {"resnet50": (2, 1000), "resnext101_32x8d": (2, 1000), "cifar_resnet20": (2, 10),
            "lstm_lm": (2, 32, 24006), "ctr_mlp": (2, 2)}
    for s in specs:
        if s.model not in want:
            continue
        w = gpu_check.data_free(s.cfg, TABLE)
        with torch.device("meta"):
            model = w.build_model()
        x, y = gpu_check.make_batch(s.cfg, w, 2, TABLE, "meta", 1)
        out = w.forward(model, x)
        assert tuple(out.shape) == want[s.model] and w.loss(out, y).shape == ()


@pytest.mark.slow
def test_translation_models_build_data_free(specs):
    """Transformer-big with the WMT'16 joined dictionary and with IWSLT'14's two (forward on CPU)."""
    got = {}
    for s in specs:
        if s.cfg.workload.name != "translation":
            continue
        w = gpu_check.data_free(s.cfg, TABLE)
        model = w.build_model()
        x, y = gpu_check.make_batch(s.cfg, w, 1, TABLE, "cpu", 1)
        with torch.no_grad():
            out = w.forward(model, x)
        assert torch.isfinite(w.loss(out, y))
        got[s.cfg.workload.source_lang] = (tuple(out.shape), sum(p.numel() for p in model.parameters()))
    # target length = the data set's mean target sentence (30.58 / 24.63 tokens), vocabulary its dictionary;
    # Transformer-big: ~210M parameters with shared embeddings (Vaswani et al. 2017: 213M)
    assert got["en"][0] == (1, 31, 32768) and got["de"][0] == (1, 25, 6640)
    assert 200e6 < got["en"][1] < 215e6


@pytest.mark.slow
def test_two_rank_exchange_over_gloo():
    lines = gpu_check.collectives("cpu", force=True)
    assert lines[0].startswith("gloo 2 ranks: all-reduce of ResNet-50's state (102 MB)")
    assert lines[1].endswith("teacher loaded bit-exact: True")


def test_cpu_without_collectives_says_why():
    assert gpu_check.collectives("cpu", force=False)[0].startswith("skip: the 2-rank checks run with --device cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_models_run_on_the_gpu(tmp_path):
    out = tmp_path / "gpu.csv"
    assert gpu_check.main(["--device", "cuda", "--steps", "5", "--models", "cifar_resnet20,resnet50",
                           "--out", str(out)]) == 0
    for r in rows(out):
        assert float(r["units_per_s"]) > 0 and float(r["peak_mem_gib"]) > 0 and r["device"] == "cuda"


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_nccl_allreduce_and_exchange():
    lines = gpu_check.collectives("cuda", force=False)
    assert lines[0].startswith("nccl 2 ranks: all-reduce") and lines[1].endswith("bit-exact: True")


def test_one_gpu_says_it_skips_nccl(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert gpu_check.collectives("cuda", force=False) == [
        "skip: the NCCL all-reduce and codistillation exchange need >= 2 GPUs; this machine has 1"]


# --------------------------------------------------------------------------- codist's own loop (gpu_codist_check)

import gpu_codist_check  # noqa: E402


def test_codist_check_configs_are_valid_runs_for_every_family():
    from codist import config
    for device, gpus in (("cuda", 8), ("cuda", 1), ("cpu", 0)):
        got = gpu_codist_check.runs(device, gpus)
        assert {w for w, _, _ in got} == {"cifar", "ctr", "lm", "translation", "imagenet"}
        for name, algo, raw in got:
            cfg = config.validate(raw, f"{name} {algo}")
            assert cfg.train.checkpoint_every and cfg.train.steps >= (300 if device == "cuda" else 40)
            # two models of one rank each everywhere: on one GPU they share it over gloo (NCCL refuses two
            # ranks a GPU), so the exchanges run on CUDA tensors there too (issue 51)
            assert (cfg.parallel.world_size, cfg.parallel.models) == (2, 2)
            assert cfg.launch.backend == ("gloo" if (device, gpus) == ("cuda", 1) else "auto")
        assert {a for _, a, _ in got} == {"codistill", "ensemble_compress"}
        # each run its own directory (named family_algorithm): on one GPU cifar's two algorithms were the
        # same all-reduce run, the second found the first's finished checkpoint and was killed at once
        assert len({(w, a) for w, a, _ in got}) == len(got)


def test_codist_check_stops_and_resumes_a_real_run_on_the_cpu(tmp_path, capsys):
    """The CPU mode for one family: a real 2-model codist run, SIGTERM after its first checkpoint
    (exit 3), the same command again resumes and finishes (exit 0)."""
    out = tmp_path / "check.csv"
    assert gpu_codist_check.main(["--device", "cpu", "--only", "ctr", "--no-throughput", "--out", str(out)]) == 0
    (row,) = rows(out)
    assert row["workload"] == "ctr" and row["ok"] == "True" and row["exit_codes"] == "3 0" and row["backend"] == "gloo"
    assert 0 < int(row["resumed_from"]) < int(row["steps"])
    printed = capsys.readouterr().out
    assert "running the same checks on the CPU" in printed
    # the stack against the lock: this machine runs the lock's torch and NCCL
    assert f"torch {torch.__version__} (lock: " in printed and "NOT the lock pins" not in printed


def test_codist_check_names_a_stack_that_is_not_the_locks(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.9.0+cu128")
    line, ok = gpu_codist_check.stack()
    assert not ok and line.startswith("torch 2.9.0+cu128 (lock: ") and "NCCL " in line
    monkeypatch.undo()
    from importlib import metadata
    real_version = metadata.version
    monkeypatch.setattr(metadata, "version",
                        lambda name: "2.0.1" if name.startswith("nvidia-nccl-") else real_version(name))
    line, ok = gpu_codist_check.stack()   # another NCCL wheel than the lock's: not the lock's stack either
    assert not ok and "installed 2.0.1" in line
