"""Real launches: the files a run leaves, the meter against the closed form, and
2 ranks x batch b == 1 rank x batch 2b."""
import json

import pytest
import torch

from codist import config
from codist.launching import launch
from codist.runtime.comm import ring_all_reduce_bytes
from codist.workloads import build_workload

pytestmark = pytest.mark.slow

ROW_FIELDS = {"step", "samples", "wall_s", "comm_bytes", "train_loss", "model", "val_loss", "val_accuracy"}
SUMMARY_FIELDS = {"run_id", "metric", "final_metric", "best_metric", "steps", "samples", "wall_s",
                  "setup_s", "world_size", "models", "comm"}
MANIFEST_FIELDS = {"run_id", "config", "seed", "git", "packages", "hardware", "world_size", "launcher",
                   "threads_per_rank", "backend"}


def param_bytes(cfg) -> int:
    torch.manual_seed(0)
    model = build_workload(cfg.workload, cfg.seed).build_model()
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def test_deepspeed_launch_writes_documented_files_and_exact_bytes(write_config, tmp_path):
    cfg = config.load(write_config({"parallel": {"world_size": 2}, "launch": {"launcher": "deepspeed"}}))
    out = tmp_path / "run"
    assert launch.run(cfg, out) == 0

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 6]                 # eval_every 3, 6 steps
    assert all(ROW_FIELDS <= set(r) for r in rows)
    assert rows[-1]["samples"] == 6 * 2 * 16
    summary = json.loads((out / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(summary)
    assert summary["final_metric"] == rows[-1]["val_accuracy"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert MANIFEST_FIELDS <= set(manifest)
    assert manifest["launcher"] == "deepspeed" and manifest["world_size"] == 2
    assert manifest["config"] == config.to_dict(cfg) and manifest["run_id"] == cfg.run_id()
    assert not list(out.glob("*.tmp"))

    # the meter: every update is one ring all-reduce of all gradients in the group of 2
    grad = summary["comm"]["by_category"]["grad_allreduce"]
    per_rank_per_step = ring_all_reduce_bytes(param_bytes(cfg), 2)
    assert grad["sent_bytes_all_ranks"] == 6 * 2 * per_rank_per_step
    assert grad["recv_bytes_all_ranks"] == grad["sent_bytes_all_ranks"]
    assert grad["calls_all_ranks"] == 6 * 2                   # one bucket per step per rank
    assert rows[-1]["comm_bytes"] == grad["sent_bytes_all_ranks"]   # nothing else is training traffic
    assert summary["comm"]["training_sent_bytes_per_rank_per_update"] == per_rank_per_step


def test_two_ranks_equal_one_rank_with_double_batch(write_config, tmp_path):
    """Sync data parallel is exact: mean of 2 half-batch gradients == the full-batch gradient.
    BatchNorm would make the halves see different statistics, so the model uses GroupNorm."""
    common = {"workload": {"norm": "group"}, "train": {"steps": 5, "eval_every": 5}, "optimizer": {"lr": 0.05}}
    one = config.load(write_config({**common, "parallel": {"world_size": 1},
                                    "train": {**common["train"], "batch_per_rank": 32}}, "one.yaml"))
    two = config.load(write_config({**common, "parallel": {"world_size": 2},
                                    "train": {**common["train"], "batch_per_rank": 16}}, "two.yaml"))
    assert launch.run(one, tmp_path / "one") == 0
    assert launch.run(two, tmp_path / "two") == 0
    a = torch.load(tmp_path / "one" / "model_0.pt", weights_only=True)
    b = torch.load(tmp_path / "two" / "model_0.pt", weights_only=True)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    # and both trained: the parameters are far from any fresh initialisation's scale of change
    torch.manual_seed(12345)
    fresh = build_workload(one.workload, one.seed).build_model().state_dict()
    assert all(not torch.allclose(fresh[k], a[k]) for k in a if a[k].is_floating_point())
