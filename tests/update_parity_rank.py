"""One process, a one-rank gloo world (tests/test_local_update.py): for each config, the same
model, batches and optimizer stepped through a DeepSpeed engine (`updates.EngineUpdate`) and
without one (`updates.LocalUpdate`); prints, as one JSON line per config, which tensors differ.

    python tests/update_parity_rank.py STEPS CONFIG.yaml [CONFIG.yaml ...]
"""
import json
import os
import sys

import torch

from codist import config
from codist.algorithms import TrainContext, build_algorithm
from codist.algorithms.updates import EngineUpdate, LocalUpdate
from codist.runtime.comm import CommMeter
from codist.runtime.distributed import init
from codist.runtime.precision import autocast
from codist.workloads import build_workload

steps = int(sys.argv[1])
torch.set_num_threads(1)
topo = init(1, "gloo")
device = torch.device("cpu")


def train(cfg, workload, update_class):
    torch.manual_seed(cfg.seed)
    model = workload.build_model()
    update = update_class(cfg, topo, model) if update_class is EngineUpdate else update_class(cfg, model)
    stream = workload.train_stream("same", 0, 1, cfg.train.batch_per_rank, 1, 0, cfg.seed)
    losses = []
    for step in range(steps):
        x, y = stream.batch(step)
        with autocast(cfg.train.precision, device):
            logits = workload.forward(update.forward_module, x).float()
        loss = workload.loss(logits, y)
        update.apply(loss)
        losses.append(loss.item())
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    for i, s in update.optimizer.state_dict()["state"].items():
        state.update({f"optimizer.{i}.{k}": v for k, v in s.items() if torch.is_tensor(v)})
    return losses, state, update.scheduler.get_last_lr(), update.scaler


for path in sys.argv[2:]:
    cfg = config.load(path)
    workload = build_workload(cfg.workload, cfg.seed)
    algorithm = build_algorithm(TrainContext(cfg, topo, CommMeter(0, topo.model_of()), workload, device))
    algorithm.setup()   # what a run of this config updates with
    engine_losses, engine_state, engine_lr, engine_scaler = train(cfg, workload, EngineUpdate)
    local_losses, local_state, local_lr, local_scaler = train(cfg, workload, LocalUpdate)
    print(json.dumps({
        "config": path,
        "losses_equal": engine_losses == local_losses,
        "losses": [engine_losses[-1], local_losses[-1]],
        "first_loss_changed": engine_losses[0] != engine_losses[-1],
        "differ": sorted(k for k in engine_state if not torch.equal(engine_state[k], local_state.get(k))),
        "tensors": len(engine_state),
        "lr_equal": engine_lr == local_lr,
        "scale": None if engine_scaler is None else [engine_scaler.get_scale(), local_scaler.get_scale()],
        "world": int(os.environ["WORLD_SIZE"]),
        "run_updates_with": type(algorithm.update).__name__,
    }), flush=True)
torch.distributed.destroy_process_group()
