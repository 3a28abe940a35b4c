"""`wall_s` (the loop's train_s) holds every host wait for the updates (issue 42): the stop-signal
agreement reads its all-reduce on the host, which on a GPU waits for every queued update, so it is
timed as training, as the evaluation's read of the loss sums is. A clock that moves only when the
loop's parts run makes the sum exact, whatever the machine."""
import time
from types import SimpleNamespace

import torch

from codist.rank import train


def test_the_stop_agreement_is_training_time(monkeypatch):
    now = [0.0]

    def spend(seconds):
        now[0] += seconds
    monkeypatch.setattr(train, "time", SimpleNamespace(perf_counter=lambda: now[0], time=time.time))
    monkeypatch.setattr(train, "evaluate_and_log", lambda run, done, diverged_at, progress: None)
    agreements = []

    def agreed(meter, device):   # the all-reduce and its host read: 100 s of waiting for the updates
        agreements.append(device)
        spend(100.0)
        return train.GO_ON
    cfg = SimpleNamespace(name="t", train=SimpleNamespace(steps=30, eval_every=30, checkpoint_every=0))
    run = SimpleNamespace(
        cfg=cfg, timers={"train_s": 0.0, "eval_s": 0.0, "loss_sum": 0.0, "loss_n": 0}, start=0, lead=False,
        losses=None, device=torch.device("cpu"), first_step_unix=None, meter=None,
        algo=SimpleNamespace(train_step=lambda step, batch: spend(1.0) or torch.tensor(1.0)),
        stream=SimpleNamespace(batch=lambda step: None), heartbeat=SimpleNamespace(beat=lambda done: None),
        stop=SimpleNamespace(agreed=agreed), machine=None)
    assert train.train_loop(run) is None
    assert len(agreements) == 2 == 30 // train.STOP_CHECK_EVERY - 1   # after updates 10 and 20 (not the last)
    assert run.timers["train_s"] == 30 * 1.0 + 2 * 100.0
