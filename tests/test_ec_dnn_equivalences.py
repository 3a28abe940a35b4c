"""EC-DNN's equivalences, bit for bit, on real 2-rank runs (issue 29): against E-DNN (compress off):
until the first ensemble exists there is nothing to compress toward, and at distill_weight 0 the
loss is 1 x CE + 0 x compression, so every update is E-DNN's though rounds happen; against MA-DNN:
before either exchanges, both train K local models from one shared initialisation."""
import pytest
import torch
from conftest import launch_run, read_rows

pytestmark = pytest.mark.slow   # real launches, ~8 s each on 2 cores: EC-DNN's loss weights need whole runs

RUN = {"parallel": {"world_size": 2, "models": 2},
       "algorithm": {"name": "ensemble_compress", "tau": 3, "distill_weight": 0.7},
       "train": {"steps": 3, "eval_every": 3}}   # round 1 comes after the 3rd and last update


def same_models(ec, e) -> None:
    for name in ("0", "1"):
        a = torch.load(ec / f"model_{name}.pt", weights_only=True)
        b = torch.load(e / f"model_{name}.pt", weights_only=True)
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), f"model {name} differs from E-DNN's"


def e_dnn(run: dict) -> dict:
    return {**run, "algorithm": {**run["algorithm"], "compress": False}}


def test_ec_dnn_at_distill_weight_0_trains_as_e_dnn_through_its_rounds(tmp_path):
    run = {**RUN, "algorithm": {**RUN["algorithm"], "tau": 1, "distill_weight": 0.0}}   # rounds after updates 1, 2, 3
    same_models(launch_run(tmp_path / "ec", run), launch_run(tmp_path / "e", e_dnn(run)))


def test_ec_dnn_trains_as_e_dnn_until_its_first_round(tmp_path):
    ec = launch_run(tmp_path / "ec", RUN)
    same_models(ec, launch_run(tmp_path / "e", e_dnn(RUN)))
    # and the two models moved: the check compares trained weights, not two copies of the start
    first = torch.load(ec / "model_0.pt", weights_only=True)
    second = torch.load(ec / "model_1.pt", weights_only=True)
    assert any(not torch.equal(first[k], second[k]) for k in first)


def test_ec_dnn_local_models_before_round_one_are_ma_dnns_from_the_shared_start(tmp_path):
    run = {**RUN, "train": {"steps": 4, "eval_every": 2}}   # rows after update 2; both exchange after update 4
    ec = launch_run(tmp_path / "ec", {**run, "algorithm": {**run["algorithm"], "tau": 4}})
    ma = launch_run(tmp_path / "ma", {**run, "algorithm": {"name": "model_average", "tau": 4}})

    def at_2(path):
        return {r["model"]: r["val_loss"] for r in read_rows(path) if r["step"] == 2 and r["model"] in ("0", "1")}
    assert at_2(ec) == at_2(ma) and len(at_2(ec)) == 2
