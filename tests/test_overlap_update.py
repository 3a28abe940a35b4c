"""`parallel.grad_reduction: ddp` (issue 51): a model group of several ranks reduces its gradients
through torch DDP (`updates.OverlapUpdate`), whose bucketed all-reduces start while backward still
runs, instead of the DeepSpeed engine, whose all-reduce starts after backward ends. Shown in a real
2-rank gloo world by what each gradient all-reduce sees when it is issued: the first layer's
gradient not yet computed (DDP, from its second update on: its first is one bucket) or computed
(the engine, always). Then real runs at world 2, one model of 2 ranks: the DDP option's metrics
and saved model equal the engine's, bit for bit, for fp32 with clipping and for bf16 (2 ranks: the
hook's divide-then-sum and the engine's sum-then-multiply by 1/2 round alike), and a run with the
option resumed from its checkpoint equals the uninterrupted one."""
from __future__ import annotations

import os
import shutil

import pytest
import torch
import forked_world
from conftest import TINY, comparable, deep_update, launch_run, read_rows, read_summary

from codist import config
from codist.workloads import build_workload

GROUP = {"parallel": {"world_size": 2}}   # one model, a group of 2 ranks
SMALL_BUCKETS = {"parallel": {"grad_reduction": "ddp", "ddp_bucket_mb": 0.01}}   # resnet8 x 8: ~8 buckets


def _gradients_when_reduced(rank, steps):
    """Per reduction: [(update, the first layer's gradient not yet computed) for each all-reduce
    issued during the update's backward and step]."""
    import torch.distributed as dist

    from codist.algorithms import TrainContext, build_algorithm
    from codist.algorithms.updates import EngineUpdate, OverlapUpdate
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), WORLD_SIZE="2")   # what DeepSpeed asks of a launcher
    topo, out = topology(1), {}
    for reduction, extra in (("engine", {}), ("ddp", SMALL_BUCKETS)):
        cfg = config.validate(deep_update(deep_update(TINY, GROUP), extra))
        algo = build_algorithm(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                            build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
        algo.setup()
        assert type(algo.update) is {"engine": EngineUpdate, "ddp": OverlapUpdate}[reduction]
        first = next(algo.model.parameters())
        seen, step, original = [], None, dist.all_reduce

        def recording(tensor, *args, **kwargs):
            if step is not None:
                seen.append((step, first.grad is None))
            return original(tensor, *args, **kwargs)
        dist.all_reduce = recording
        try:
            stream = algo.train_stream()
            for step in range(steps):
                algo.train_step(step, stream.batch(step))
        finally:
            dist.all_reduce = original
        out[reduction] = seen
    return out


def test_ddp_reduces_buckets_while_backward_runs_and_the_engine_after_it():
    for rank, seen in forked_world.run(2, _gradients_when_reduced, 3).items():
        engine, ddp = seen["engine"], seen["ddp"]
        assert {s for s, _ in engine} == {0, 1, 2} and not any(pending for _, pending in engine), rank
        # DDP's first update: one bucket in parameter order, reduced once backward is done
        assert [pending for s, pending in ddp if s == 0] == [False], rank
        for step in (1, 2):   # rebuilt buckets in gradient-ready order: the first leaves mid-backward
            calls = [pending for s, pending in ddp if s == step]
            assert len(calls) > 2 and calls[0] is True and calls[-1] is False, (rank, step, calls)


def test_the_bucket_size_needs_ddp_and_neither_key_changes_an_engine_runs_id():
    engine = config.validate(deep_update(TINY, GROUP))
    assert engine.parallel.grad_reduction == "engine"
    assert config.run_id(engine) == config.run_id(config.validate(deep_update(TINY, {
        "parallel": {"world_size": 2, "grad_reduction": "engine"}})))
    assert "grad_reduction" not in config.to_text_dict(engine)["parallel"]   # the run's file: as before
    ddp = config.validate(deep_update(deep_update(TINY, GROUP), SMALL_BUCKETS))
    assert config.run_id(ddp) != config.run_id(engine)
    assert config.to_text_dict(ddp)["parallel"]["grad_reduction"] == "ddp"
    with pytest.raises(config.ConfigError, match="ddp_bucket_mb=0.5 with parallel.grad_reduction=engine"):
        config.validate(deep_update(TINY, {"parallel": {"world_size": 2, "ddp_bucket_mb": 0.5}}))


CASES = {"fp32 clipped": {"optimizer": {"grad_clip": 0.05}}, "bf16": {"train": {"precision": "bf16"}}}
BASE = {**GROUP, "train": {"steps": 8, "eval_every": 4, "checkpoint_every": 5}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("overlap")
    done = {}

    def get(case, reduction):
        if (case, reduction) not in done:
            extra = deep_update(deep_update(BASE, CASES[case]), SMALL_BUCKETS if reduction == "ddp" else {})
            done[case, reduction] = launch_run(root / f"{case.replace(' ', '-')}-{reduction}", extra)
        return done[case, reduction]
    return get


def models(run):
    return torch.load(run / "model_0.pt", weights_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_ddp_option_trains_as_the_engine_does(runs, case):
    engine, ddp = runs(case, "engine"), runs(case, "ddp")
    strip = [{k: v for k, v in row.items() if k != "comm_bytes"} for row in comparable(read_rows(engine))]
    assert strip == [{k: v for k, v in row.items() if k != "comm_bytes"} for row in comparable(read_rows(ddp))]
    a, b = models(engine), models(ddp)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    sent = [read_summary(run)["comm"]["by_category"]["grad_allreduce"] for run in (engine, ddp)]
    assert sent[0]["sent_bytes_all_ranks"] == sent[1]["sent_bytes_all_ranks"]   # the same gradients sent
    assert sent[1]["calls_all_ranks"] > sent[0]["calls_all_ranks"]   # in many buckets, not one tensor


@pytest.mark.slow
def test_a_resumed_run_with_the_ddp_option_equals_the_uninterrupted_one(runs):
    ref = runs("fp32 clipped", "ddp")
    resumed = ref.with_name("ddp-resumed")
    shutil.copytree(ref, resumed)
    for pattern in ("summary.json", "metrics.jsonl", "model_*.pt", "val_predictions_*.npy"):
        for path in resumed.glob(pattern):
            path.unlink()
    launch_run(resumed, deep_update(deep_update(BASE, CASES["fp32 clipped"]), SMALL_BUCKETS))
    assert read_summary(resumed)["resumed_from_step"] == 5
    assert comparable(read_rows(resumed)) == comparable(read_rows(ref))
    a, b = models(ref), models(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    state = torch.load(ref / "checkpoint" / "step-5" / "group-0.pt", weights_only=True)["algorithm"]
    assert len(state["ddp_buckets"]) > 2   # the rebuilt layout, given to the resumed run's DDP
