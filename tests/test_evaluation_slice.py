"""`train.eval_size`: an evaluation on a slice of the validation set (the rehearsal's ImageNet
jobs read 100 of the miniature's 1,000 images), evenly spaced, and nothing else changed."""
import numpy as np
import pytest
import torch
from conftest import TINY, deep_update, launch_run, read_rows
from torch.utils.data import Dataset, Subset, TensorDataset

from codist import config
from codist.runtime.data import evaluation_slice
from codist.workloads import build_workload


class Items(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def test_a_slice_is_evenly_spaced_over_the_set_and_0_is_the_whole_set():
    t = TensorDataset(torch.arange(10), torch.arange(10) * 2)
    s = evaluation_slice(t, 4)
    assert isinstance(s, TensorDataset)   # eval_batches' fast path
    assert s.tensors[0].tolist() == [0, 2, 5, 7] and s.tensors[1].tolist() == [0, 4, 10, 14]   # i * 10 // 4
    folder = evaluation_slice(Items(1000), 100)   # an ImageFolder's 1,000 classes: every 10th
    assert isinstance(folder, Subset) and [folder[i] for i in range(3)] == [0, 10, 20] and len(folder) == 100
    for size in (0, 10, 11):
        assert evaluation_slice(t, size) is t


def test_eval_size_0_keeps_every_run_id_and_a_slice_gets_its_own():
    cfg = config.validate(TINY)
    assert config.validate(deep_update(TINY, {"train": {"eval_size": 0}})).run_id() == cfg.run_id()
    assert config.validate(deep_update(TINY, {"train": {"eval_size": 7}})).run_id() != cfg.run_id()
    with pytest.raises(config.ConfigError, match="eval_size"):
        config.validate(deep_update(TINY, {"train": {"eval_size": -1}}))


@pytest.mark.slow
def test_a_run_evaluates_its_slice_only(tmp_path):
    """The last row's validation loss and accuracy are the saved model's on the 7 examples at
    i * 128 // 7 of the 128, computed here with numpy (the whole set's differ)."""
    extra = {"train": {"eval_size": 7}}
    run = launch_run(tmp_path / "run", extra)
    last = [r for r in read_rows(run) if r["step"] == TINY["train"]["steps"]][0]
    w = build_workload(config.validate(deep_update(TINY, extra)).workload, 0)
    model = w.build_model()
    model.load_state_dict(torch.load(run / "model_0.pt", weights_only=True))
    model.eval()
    val = w.val_dataset()

    def scores(idx):
        x, y = (torch.stack(t) for t in zip(*[val[i] for i in idx]))
        with torch.no_grad():
            z = model(x).double().numpy()
        logp = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
        y = y.numpy()
        return float(-logp[np.arange(len(y)), y].mean()), float((z.argmax(1) == y).mean())

    loss, accuracy = scores([i * 128 // 7 for i in range(7)])
    assert last["val_loss"] == pytest.approx(loss, rel=1e-5)
    assert last["val_accuracy"] == pytest.approx(accuracy)
    assert last["val_loss"] != pytest.approx(scores(range(128))[0], rel=1e-5)


CTR = {"name": "ctr", "workload": {"name": "ctr", "train_size": 2000, "val_size": 500},
       "optimizer": {"name": "adagrad", "lr": 0.03, "weight_decay": 0.0},
       "parallel": {"world_size": 1}, "train": {"steps": 2, "batch_per_rank": 32, "eval_every": 2, "eval_batch": 500},
       "launch": {"launcher": "warm", "threads_per_rank": 1}}


@pytest.mark.slow
def test_a_slice_leaves_out_the_gap_to_the_whole_sets_optimum(tmp_path):
    """The embedded CTR task's val_bayes_gap subtracts the optimum over all 500 validation examples:
    reported for the whole set, left out for 50 of them (it would be neither exact nor comparable)."""
    rows = {}
    for size in (0, 50):
        run = launch_run(tmp_path / f"ctr{size}", {"train": {"eval_size": size}}, base=CTR)
        rows[size] = [r for r in read_rows(run) if r["step"] == 2][0]
    assert "val_bayes_gap" in rows[0] and "val_bayes_gap" not in rows[50]
    assert rows[0]["val_loss"] != rows[50]["val_loss"]
