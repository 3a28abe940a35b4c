"""A model group of one rank updates without a DeepSpeed engine (`updates.LocalUpdate`, issue 12):
the same numbers as the engine's update, bit for bit, for every precision and with clipping (a
real engine and the local update in one real one-rank gloo world: tests/update_parity_rank.py),
and the runs that use it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from codist import config
from codist.launching import launch
from conftest import TINY, deep_update


RANK_SCRIPT = Path(__file__).with_name("update_parity_rank.py")
CASES = {   # name -> overrides of TINY: every optimizer family, clipping, the mixed precisions
    "sgd cosine": {},
    "sgd clipped": {"optimizer": {"grad_clip": 0.05}},
    "sgd, clip above the norm": {"optimizer": {"grad_clip": 1000.0}},   # a clip that never binds scales by 1
    "adam clipped": {"optimizer": {"name": "adam", "lr": 0.003, "grad_clip": 0.5}},
    "bf16": {"train": {"precision": "bf16"}},
    "fp16 clipped": {"train": {"precision": "fp16"}, "optimizer": {"grad_clip": 0.05}},
}


def test_local_update_is_the_engine_update_bit_for_bit(tmp_path):
    paths = []
    for i, overrides in enumerate(CASES.values()):
        path = tmp_path / f"case{i}.yaml"
        path.write_text(json.dumps(config.to_dict(config.validate(deep_update(TINY, overrides)))))
        paths.append(str(path))
    env = launch.launch_env(config.load(paths[0]), "cpu", threads=1)
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(launch.free_port()))
    proc = subprocess.run([sys.executable, str(RANK_SCRIPT), "12", *paths], env=env, capture_output=True,
                          text=True, timeout=300)   # one process for every case: torch and DeepSpeed import once
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(CASES)
    for case, r in zip(CASES, results):
        assert r["first_loss_changed"] and r["tensors"] > 10, case   # it trained, and the state was compared
        assert r["losses_equal"], (case, r["losses"])
        assert r["differ"] == [] and r["lr_equal"], (case, r["differ"])
        assert r["run_updates_with"] == "LocalUpdate", case   # what a one-rank run of this config uses
        if "fp16" in case:
            assert r["scale"][0] == r["scale"][1], case


def test_a_parameter_without_a_gradient_in_an_update_is_left_alone_by_it():
    """Gradients are set to None between updates, as the engine sets them: torch's optimizers skip a
    parameter with none, so a head that took part in update 1 but not in update 2 does not move in
    update 2 (a zeroed gradient would let weight decay and its momentum move it)."""
    import torch
    from torch import nn

    from codist.algorithms.updates import LocalUpdate

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 2), nn.Linear(3, 2)

    model = TwoHeads()
    cfg = config.validate(deep_update(TINY, {"optimizer": {"weight_decay": 0.1, "momentum": 0.9}}))
    update = LocalUpdate(cfg, model)
    x = torch.ones(4, 3)
    update.apply((model.a(x) + model.b(x)).pow(2).sum())   # both heads: both move, b gets momentum
    b_after_1, a_after_1 = model.b.weight.detach().clone(), model.a.weight.detach().clone()
    update.apply(model.a(x).pow(2).sum())                  # head a only
    assert model.b.weight.grad is None and torch.equal(model.b.weight, b_after_1)
    assert not torch.equal(model.a.weight, a_after_1)
