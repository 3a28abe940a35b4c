"""The training loop waits for the device once per logging interval, not after every update (issue
28): the updates between two evaluations read nothing back to the host, and the logged training
and distillation losses are still the host's float sums of each update's loss, in update order."""
import os

import torch
import torch.multiprocessing as mp
import yaml
from conftest import TINY, deep_update

from codist.launching import launch

# one model with an extra loss term (so both sums are exercised), evaluated every 10 updates
RUN = deep_update(TINY, {"algorithm": {"name": "label_smoothing", "weight": 0.2},
                         "train": {"steps": 20, "eval_every": 10}})
READS = ("item", "tolist", "__float__", "__bool__", "__int__", "__index__", "numpy")


def _rank(rank, port, out_dir, out):
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      CODIST_THREADS_PER_RANK="1")
    from codist import config
    from codist.rank import train
    cfg = config.validate(RUN, "test")
    (out_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(cfg)))
    run = train.set_up(train.parse_args(["--config", str(out_dir / "config.yaml"), "--out", str(out_dir)]))
    train.resume(run)
    # updates 1-9 (the stop check is after update 10, the first evaluation too): count host reads
    reads = []
    originals = {name: getattr(torch.Tensor, name) for name in READS}
    for name, original in originals.items():
        setattr(torch.Tensor, name, lambda self, *a, _n=name, _o=original, **k: reads.append(_n) or _o(self, *a, **k))
    try:
        assert train.train_loop(run, until=9) is None
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    out["reads"] = reads
    # the rest, recording each update's losses as the host summed them before
    run.start, losses, train_step = 9, [], run.algo.train_step

    def recorded(step, batch):
        loss = train_step(step, batch)
        losses.append((loss.item(), run.algo.last_distill.item()))
        return loss
    run.algo.train_step = recorded
    assert train.train_loop(run) is None
    out["losses"], out["rows"] = losses, run.rows
    torch.distributed.destroy_process_group()


def test_no_host_read_between_evaluations_and_the_same_logged_losses(tmp_path):
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_rank, args=(launch.free_port(), tmp_path, out), nprocs=1)
        got = dict(out)
    assert got["reads"] == []
    # updates 10-20 were recorded; the second interval (updates 11-20) is the last 10 of them
    second = got["losses"][1:]
    row = got["rows"][1]
    assert row["step"] == 20
    task_sum = distill_sum = 0.0
    for task, distill in second:   # the host's sums, as the loop summed them before
        task_sum += task
        distill_sum += distill
    assert row["train_loss"] == task_sum / 10 and row["distill_loss"] == distill_sum / 10
