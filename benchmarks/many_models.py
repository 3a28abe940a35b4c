"""Many tiny models in one process: N models updated together through torch.func (stack_module_state +
vmap(grad(...)) + one optimizer over the stacked parameters) against the same N models updated one after
another, one thread, the same batches. Decides whether a "several seeds in one process" option is worth
building (issue 38: only at >= 2x the throughput and bit-identical per model to a separate run).

    python benchmarks/many_models.py [--models 4 8] [--updates 30] [--out results/bench]

Workloads: the embedded LM (2 x 64 LSTM, batch 32 x 32 tokens, Adam) and the Sun CIFAR stand-in
(ResNet-8 width 8, 12x12 images, batch 32, SGD momentum). vmap cannot update BatchNorm's running
statistics in place, so both sides of the image row use torch.func.replace_all_batch_norm_modules_
(batch statistics only): the speed is comparable, the models are not the harness's.
Per row: updates per second of each side (N models x updates / s), their ratio, and the largest
absolute difference between a stacked model's parameters and its separately trained twin after the
timed updates (0.0: bit-identical). The load average is recorded beside each row and a row timed at
load >= benchlib.QUIET_LOAD is refused, never written. Writes results/bench/many_models.csv.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time

from benchmarks import benchlib
from codist.runlog import cpu_model

BATCH = 32


def models_and_data(torch, workload: str, n: int, updates: int):
    """N freshly initialised models (seeds 0..n-1), a loss(model_output, y), and per update a batch per model."""
    g = torch.Generator().manual_seed(0)
    if workload == "lm":
        from codist.workloads.lm import LstmLM
        models = []
        for seed in range(n):
            torch.manual_seed(seed)
            models.append(LstmLM(256, 32, 64, 2))
        data = [(torch.randint(0, 256, (n, BATCH, 32), generator=g), torch.randint(0, 256, (n, BATCH, 32), generator=g))
                for _ in range(updates)]
        loss = lambda out, y: torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))  # noqa: E731
        make_opt = lambda ps: torch.optim.Adam(ps, lr=0.003)   # noqa: E731
    else:
        from torch.func import replace_all_batch_norm_modules_

        from codist.workloads.image_models import build_cifar_resnet
        models = []
        for seed in range(n):
            torch.manual_seed(seed)
            models.append(replace_all_batch_norm_modules_(build_cifar_resnet(8, 8, 10, "batch")))
        data = [(torch.randn(n, BATCH, 3, 12, 12, generator=g), torch.randint(0, 10, (n, BATCH), generator=g))
                for _ in range(updates)]
        loss = torch.nn.functional.cross_entropy
        make_opt = lambda ps: torch.optim.SGD(ps, lr=0.02, momentum=0.9, weight_decay=5e-4)   # noqa: E731
    return models, data, loss, make_opt


def compare(workload: str, n: int, updates: int) -> dict:
    import torch
    from torch.func import functional_call, grad, stack_module_state, vmap

    torch.set_num_threads(1)
    models, data, loss, make_opt = models_and_data(torch, workload, n, updates + 2)
    twins = [copy.deepcopy(m) for m in models]
    opts = [make_opt(m.parameters()) for m in twins]

    def separate(step: int) -> None:
        x, y = data[step]
        for i, (m, opt) in enumerate(zip(twins, opts)):
            opt.zero_grad(set_to_none=True)
            loss(m(x[i]), y[i]).backward()
            opt.step()

    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    call = lambda p, b, x: functional_call(base, (p, b), (x,))   # noqa: E731  (the LM: a tensor runs from zero state)

    stacked_opt = make_opt(params.values())
    grads = vmap(grad(lambda p, b, x, y: loss(call(p, b, x), y)))

    def stacked(step: int) -> None:
        x, y = data[step]
        g = grads(params, buffers, x, y)
        for k, v in params.items():
            v.grad = g[k]
        stacked_opt.step()

    out = {}
    load_before = benchlib.loadavg()
    for name, side in (("separate", separate), ("stacked", stacked)):
        side(0)   # warm-up: kernels' selection, allocator
        t0 = time.perf_counter()
        for step in range(1, updates + 1):
            side(step)
        out[name] = n * updates / (time.perf_counter() - t0)
    with torch.no_grad():
        diff = max(float((params[k][i] - dict(twins[i].named_parameters())[k]).abs().max())
                   for k in params for i in range(n))
    return {"workload": workload, "model": f"{workload}, {n} models", "models": n, "batch": BATCH, "updates": updates,
            "separate_updates_per_s": out["separate"], "stacked_updates_per_s": out["stacked"],
            "speedup": out["stacked"] / out["separate"], "max_abs_param_diff": diff,
            "bit_identical": diff == 0.0, "loadavg": max(load_before, benchlib.loadavg()),
            "cpu": cpu_model(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=int, nargs="+", default=[4, 8])
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--workloads", nargs="+", default=["lm", "cifar"], choices=["lm", "cifar"])
    p.add_argument("--out", default=str(benchlib.ROOT / "results" / "bench"))
    args = p.parse_args(argv)
    rows = []
    for workload in args.workloads:
        for n in args.models:
            rows.append(compare(workload, n, args.updates))
            print(rows[-1], flush=True)
    return benchlib.write_quiet(rows, args.out, "many_models.csv")


if __name__ == "__main__":
    sys.exit(main())
