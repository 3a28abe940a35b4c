"""Communication per update, per algorithm, for the papers' models: measured by the meter in
real runs of a few steps at 2 CPU ranks, scaled to the papers' worker counts by the closed
form, and checked against it.

The model is the real one (torchvision ResNet-50, 25.6M parameters) on tiny embedded images,
so a step takes a second on a CPU; bytes depend only on the model and the algorithm.

    python benchmarks/comm_volume.py [--model resnet50] [--out results/bench]

Writes results/bench/comm_volume.csv: for each algorithm, the measured bytes per exchange
(or per update) at 2 ranks, the closed form at 2 ranks (must be equal), and the projection
at the paper's configuration: bytes sent per rank per update, in total and on the slow links
between model groups.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

from codist import config, launch
from codist.algorithms.state import flat_state
from codist.comm import ring_all_reduce_bytes
from codist.workloads import build_workload

STEPS = 4


def run(extra: dict, model: str) -> dict:
    raw = {"workload": {"name": "imagenet", "arch": model, "classes": 10, "train_size": 64, "val_size": 8},
           "train": {"steps": STEPS, "batch_per_rank": 2, "eval_every": STEPS, "eval_batch": 8, "save_model": False},
           "launch": {"launcher": "torchrun", "threads_per_rank": 1}, **extra}
    cfg = config.validate(raw, "benchmarks/comm_volume.py")
    with tempfile.TemporaryDirectory() as tmp:
        assert launch.run(cfg, Path(tmp) / "run") == 0
        return json.loads((Path(tmp) / "run" / "summary.json").read_text())["comm"]["by_category"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    w = build_workload(config.validate({"workload": {"name": "imagenet", "arch": args.model, "classes": 1000}}).workload, 0)
    net = w.build_model()
    params_b = sum(q.numel() for q in net.parameters()) * 4       # fp32 gradients / parameters
    state_b = flat_state(net).numel() * 4                          # + BatchNorm statistics (checkpoint)
    small = build_workload(config.validate({"workload": {"name": "imagenet", "arch": args.model,
                                                          "classes": 10}}).workload, 0).build_model()
    params2, state2 = sum(q.numel() for q in small.parameters()) * 4, flat_state(small).numel() * 4
    two = {"parallel": {"world_size": 2, "models": 2}}
    rows = []

    # all-reduce: every update, a ring all-reduce of the gradients over all workers
    m = run({"parallel": {"world_size": 2}}, args.model)["grad_allreduce"]
    rows.append(dict(algorithm="allreduce", config="every update", paper="Sodhani base: 16 GPUs",
                     measured_2ranks=m["sent_bytes_all_ranks"] / 2 / STEPS, closed_2ranks=ring_all_reduce_bytes(params2, 2),
                     per_rank_per_update=ring_all_reduce_bytes(params_b, 16), between_groups_per_rank_per_update=0.0))
    # codistill: exchange every k updates, each model's state to the other model's ranks
    m = run({**two, "algorithm": {"name": "codistill", "exchange_every": 2, "data": "same"}}, args.model)["param_exchange"]
    per_exchange_2 = m["sent_bytes_all_ranks"] / 2 / 2               # 2 exchanges in 4 steps, 2 ranks
    for k, paper in ((50, "Anil: k=50"), (2500, "Sodhani: k=2500")):
        # 2 models x 8 ranks (Sodhani) : each rank sends its state to 1 counterpart every k updates,
        # and all-reduces gradients inside its group of 8 every update
        within = ring_all_reduce_bytes(params_b, 8)
        rows.append(dict(algorithm="codistill", config=f"n=2, k={k}", paper=f"{paper}; 2 models x 8 GPUs",
                         measured_2ranks=per_exchange_2, closed_2ranks=state2,
                         per_rank_per_update=within + state_b / k, between_groups_per_rank_per_update=state_b / k))
    # MA-DNN: parameter average over K workers every tau updates
    m = run({**two, "algorithm": {"name": "model_average", "tau": 2, "average_buffers": True}}, args.model)["model_average"]
    rows.append(dict(algorithm="model_average", config="K=8, tau=16", paper="Sun: MA-DNN tau=16",
                     measured_2ranks=m["sent_bytes_all_ranks"] / 2 / 2, closed_2ranks=ring_all_reduce_bytes(state2, 2),
                     per_rank_per_update=ring_all_reduce_bytes(state_b, 8) / 16,
                     between_groups_per_rank_per_update=ring_all_reduce_bytes(state_b, 8) / 16))
    # EC-DNN: every tau updates each worker gathers the other K-1 local models
    m = run({**two, "algorithm": {"name": "ensemble_compress", "tau": 2}}, args.model)["param_exchange"]
    rows.append(dict(algorithm="ensemble_compress", config="K=8, tau=4000", paper="Sun: EC-DNN tau=4000 (CIFAR-10)",
                     measured_2ranks=m["sent_bytes_all_ranks"] / 2 / 2, closed_2ranks=(2 - 1) * state2,
                     per_rank_per_update=(8 - 1) * state_b / 4000,
                     between_groups_per_rank_per_update=(8 - 1) * state_b / 4000))
    df = pd.DataFrame(rows)
    df["measured_equals_closed_form"] = df.measured_2ranks == df.closed_2ranks
    df["allreduce_over_this_between_groups"] = [None if b == 0 else ring_all_reduce_bytes(params_b, 16) / b
                                               for b in df.between_groups_per_rank_per_update]
    df["model"], df["model_params_bytes"], df["model_state_bytes"] = args.model, params_b, state_b
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "comm_volume.csv", index=False)
    print(df.drop(columns=["model", "model_params_bytes", "model_state_bytes"]).to_markdown(index=False))
    assert df.measured_equals_closed_form.all(), "the meter disagrees with the closed form"


if __name__ == "__main__":
    main()
