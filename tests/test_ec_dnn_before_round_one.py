"""EC-DNN before its first round (issue 29): until the first ensemble exists there is nothing to
compress toward, so EC-DNN's updates are E-DNN's (compress off), bit for bit; two real 2-rank runs."""
import pytest
import torch
from conftest import launch_run

pytestmark = pytest.mark.slow   # two real launches, ~15 s each on 2 cores: EC-DNN's loss before round 1

RUN = {"parallel": {"world_size": 2, "models": 2},
       "algorithm": {"name": "ensemble_compress", "tau": 3, "distill_weight": 0.7},
       "train": {"steps": 3, "eval_every": 3}}   # round 1 comes after the 3rd and last update


def test_ec_dnn_trains_as_e_dnn_until_its_first_round(tmp_path):
    ec = launch_run(tmp_path / "ec", RUN)
    e = launch_run(tmp_path / "e", {**RUN, "algorithm": {**RUN["algorithm"], "compress": False}})
    for name in ("0", "1"):
        a = torch.load(ec / f"model_{name}.pt", weights_only=True)
        b = torch.load(e / f"model_{name}.pt", weights_only=True)
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), f"model {name} differs before any round"
    # and the two models moved: the check compares trained weights, not two copies of the start
    first = torch.load(ec / "model_0.pt", weights_only=True)
    second = torch.load(ec / "model_1.pt", weights_only=True)
    assert any(not torch.equal(first[k], second[k]) for k in first)
