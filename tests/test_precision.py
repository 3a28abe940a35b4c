"""train.precision (issue 14): fp32 by default with every earlier run id unchanged; bf16 and fp16
through DeepSpeed's torch_autocast with fp32 master weights; distillation and ensemble terms in
fp32; gradients all-reduced in 16 bits and counted at 2 bytes per value (real 2-rank CPU runs)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from codist import config
from codist.algorithms.distillation_loss import distill_loss, teacher_probs
from codist.algorithms.state import OutputEnsemble, flat_state
from codist.config import ConfigError
from codist.rank import checkpoint
from codist.runtime.comm import ring_all_reduce_bytes
from codist.runtime.cuda_defaults import maybe_compile, place_model
from codist.runtime.engine import deepspeed_config
from codist.workloads import build_workload
from conftest import TINY, deep_update, launch_run, read_rows, read_summary

ROOT = Path(__file__).resolve().parents[1]
BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "fp16": 2}
TWO_RANKS = {"parallel": {"world_size": 2}}


def tiny(**train) -> config.RunConfig:
    return config.validate(deep_update(TINY, {"train": train}))


# --------------------------------------------------------------------------- config and run id

def test_fp32_is_the_default_and_keeps_every_run_id():
    assert tiny().train.precision == "fp32"
    assert tiny(precision="fp32").run_id() == tiny().run_id() == tiny(compile=True).run_id()
    assert len({tiny().run_id(), tiny(precision="bf16").run_id(), tiny(precision="fp16").run_id()}) == 3
    # the committed results name their runs by id: the plan must still give those ids
    sys.path.insert(0, str(ROOT / "workflows"))
    from experiments import EVERY_TIER, load_plan
    planned = set(load_plan(ROOT / "replications", "embedded", tier=EVERY_TIER).configs)
    committed = {r["run_id"] for name in ("cifar10", "cifar10_k4", "cifar10_speed", "communication")
                 for r in json.loads((ROOT / f"results/embedded/sun2016/{name}_runs.json").read_text())["runs"]}
    assert committed and committed <= planned


def test_a_bad_precision_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"train.precision: got 'fp8': Input should be 'fp32', 'bf16' or 'fp16'"):
        tiny(precision="fp8")


def test_deepspeed_config_per_precision():
    fp32 = deepspeed_config(tiny())
    assert not {"torch_autocast", "communication_data_type", "bf16", "fp16"} & fp32.keys()
    for p in ("bf16", "fp16"):
        ds = deepspeed_config(tiny(precision=p))
        assert ds["torch_autocast"] == {"enabled": True, "dtype": p} and ds["communication_data_type"] == p
        assert {k: v for k, v in ds.items() if k not in ("torch_autocast", "communication_data_type")} == fp32


# --------------------------------------------------------------------------- terms in fp32

def test_distillation_and_ensemble_terms_are_computed_in_fp32():
    g = torch.Generator().manual_seed(0)
    student = (torch.randn(8, 10, generator=g) * 4).bfloat16()
    teachers = [(torch.randn(8, 10, generator=g) * 4).bfloat16() for _ in range(2)]
    q = teacher_probs(teachers, 2.0)
    assert q.dtype == torch.float32
    torch.testing.assert_close(q, teacher_probs([t.float() for t in teachers], 2.0), rtol=0, atol=0)
    for kind in ("kl", "soft_ce"):
        term = distill_loss(student, q, 2.0, kind)
        assert term.dtype == torch.float32
        assert term.item() == distill_loss(student.float(), q, 2.0, kind).item()
    members = [torch.nn.Linear(4, 10).bfloat16() for _ in range(2)]
    x = torch.randn(3, 4, generator=g).bfloat16()
    out = OutputEnsemble(members)(x)
    assert out.dtype == torch.float32
    want = torch.stack([F.softmax(m(x).float(), -1) for m in members]).mean(0).log()
    torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_cuda_defaults_leave_a_cpu_model_as_it_is_and_compile_in_place():
    cpu = torch.device("cpu")
    model = place_model(torch.nn.Conv2d(3, 4, 3), cpu, convnet=True)
    assert model.weight.is_contiguous() and not model.weight.is_contiguous(memory_format=torch.channels_last)
    keys = list(model.state_dict())
    compiled = maybe_compile(model, True)   # built, not run (running inductor on CPU needs a C++ compiler)
    assert compiled is model and model._compiled_call_impl is not None and list(model.state_dict()) == keys
    assert maybe_compile(torch.nn.Linear(2, 2), False)._compiled_call_impl is None


# --------------------------------------------------------------------------- real runs on 2 CPU ranks

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """precision -> a finished 2-rank all-reduce run (fp16 checkpoints at update 3)."""
    root = tmp_path_factory.mktemp("precision")
    cache = {}

    def get(precision):
        if precision not in cache:
            train = {"precision": precision, **({"checkpoint_every": 3} if precision == "fp16" else {})}
            cache[precision] = launch_run(root / precision, {**TWO_RANKS, "train": train})
        return cache[precision]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_gradient_allreduce_bytes_are_counted_at_the_dtype_sent(runs, precision):
    run = runs(precision)
    s = read_summary(run)["comm"]["by_category"]["grad_allreduce"]
    cfg = config.validate(deep_update(TINY, TWO_RANKS))
    values = flat_state(build_workload(cfg.workload, 0).build_model(), False).numel()   # parameters only
    steps, world = cfg.train.steps, 2
    per_rank = ring_all_reduce_bytes(values * BYTES_PER_VALUE[precision], world)
    assert s["sent_bytes_all_ranks"] == steps * world * per_rank
    assert s["calls_all_ranks"] == steps * world   # one bucket per update: the whole gradient


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_fp32_master_weights_at_lower_precision(runs, precision):
    fp32, mixed = runs("fp32"), runs(precision)
    a = torch.load(fp32 / "model_0.pt", weights_only=True)
    b = torch.load(mixed / "model_0.pt", weights_only=True)
    floats = [k for k in b if b[k].is_floating_point()]
    assert all(b[k].dtype == torch.float32 for k in floats)   # the master weights
    assert any(not torch.equal(a[k], b[k]) for k in floats)   # the forward did run at 16 bits
    for row in read_rows(mixed):
        assert torch.isfinite(torch.tensor(row["train_loss"]))


@pytest.mark.slow
def test_fp16_checkpoints_its_dynamic_loss_scale(runs):
    run = runs("fp16")
    rid = json.loads((run / "manifest.json").read_text())["run_id"]
    group, _ = checkpoint.load(run, checkpoint.latest(run, rid), rid, 0, 0)
    scaler = group["algorithm"]["grad_scaler"]
    assert 0 < scaler["scale"] <= 2.0 ** 16 and "_growth_tracker" in scaler


def test_the_fused_lstm_in_bf16_is_refused_before_launch_on_a_cpu_without_bf16_kernels():
    """oneDNN's bf16 LSTM needs AVX512-BF16 or AMX-BF16 (an AMD EPYC without them failed in every rank's
    first forward, issue 50): `codist run` refuses it before any process starts, naming the keys; the
    unrolled cell, fp32 and a GPU are left alone. The CPU's flags are passed in (this machine has them)."""
    from codist.launching.launch import check_bf16_lstm
    lm = config.validate({"workload": {"name": "lm", "dataset": "embedded"}, "train": {"precision": "bf16"}})
    with pytest.raises(ConfigError, match=r"train\.precision=bf16 with workload\.lstm=fused needs a CPU with "
                                          r"AVX512-BF16 or AMX-BF16 .*allowed: train\.precision=fp32"):
        check_bf16_lstm(lm, "cpu", flags={"avx512f", "avx2"})
    for flags in ({"amx_bf16"}, {"avx512_bf16"}):
        check_bf16_lstm(lm, "cpu", flags=flags)
    check_bf16_lstm(lm, "cuda", flags=set())
    for other in ({"train": {"precision": "fp32"}}, {"workload": {"lstm": "unrolled"}}):
        check_bf16_lstm(config.validate(deep_update({"workload": {"name": "lm", "dataset": "embedded"},
                                                     "train": {"precision": "bf16"}}, other)), "cpu", flags=set())
    check_bf16_lstm(config.validate({"workload": {"name": "cifar"}, "train": {"precision": "bf16"}}), "cpu", flags=set())
