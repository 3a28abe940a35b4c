"""Pilot (seeds >= 100): the embedded LM's gradient noise scale B_simple = tr(Sigma) / |G|^2 along a sync
run, against the validation loss's gap to the HMM's Bayes-optimal loss: a cheap second estimate of the
critical batch beside critical_batch.csv's step counts (issue 37).

    python replications/anil2018/pilots/noise_scale.py --seed 100 [--batch 64] [--steps 2000] [--every 250]
        [--draws 16] [--small 32] [--big 512] >> replications/anil2018/pilots/noise_scale.csv

McCandlish et al. 2018 ("An empirical model of large-batch training", Sec. 2.2 and App. A.1): with
the gradient's squared norm measured at two batch sizes, unbiased estimates are
    |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
and B_simple = tr(Sigma) / |G|^2, the batch at which a step's gradient noise equals its signal (a
ratio of the two estimates, each averaged over `draws` batch pairs first, as their paper does).
They find the critical batch tracks B_simple and grows as the loss falls (Kaplan et al. 2020: B_crit
is roughly a power of the loss, hardly dependent on model size); the gap to the Bayes loss places a
claim's target on that curve.

The run: lm_pilot_base.yaml's LM (2 x 64 LSTM, Adam 3e-3, constant LR), one process, `--batch` per
update, trained on the stream as a rank trains (carried LSTM state). The noise draws come from a
second stream of the embedded language (the run's seed + 7919: text the run never trains on) and are
evaluated from a zero LSTM state (no carried state), so they measure the gradient of segments of
fresh text: a close, not identical, stand-in for the training gradient. The Adam caveat: B_simple is
derived for SGD; McCandlish et al. report it predicts the critical batch for Adam too, roughly.
Validation: the workload's whole validation set (val_loss, val_bayes_gap) at every estimate.
Prints CSV rows (a header with --header); nothing here is timed.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch
import yaml

from codist import config
from codist.workloads import build_workload

HERE = Path(__file__).resolve().parent
FIELDS = ["seed", "batch", "lr", "step", "val_loss", "val_bayes_gap", "g2", "trace_sigma", "b_simple",
          "b_small", "b_big", "draws"]


def squared_norm(workload, model, params, inputs, targets) -> float:
    """|g|^2 of the mean loss's gradient on one batch (inputs from a zero LSTM state)."""
    loss = workload.loss(workload.forward(model, inputs), targets)
    grads = torch.autograd.grad(loss, params)
    return float(sum((g.double() ** 2).sum() for g in grads))


def noise_scale(workload, model, small, big, b_small: int, b_big: int, draws: int, at: int) -> tuple[float, float]:
    """(|G|^2, tr(Sigma)) from `draws` pairs of a small and a big batch (fresh text, drawn at index `at` on)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def mean_squared_norm(stream) -> float:
        batches = (stream.batch(at + k) for k in range(draws))
        return sum(squared_norm(workload, model, params, inputs["tokens"], targets)
                   for inputs, targets in batches) / draws

    g_small, g_big = mean_squared_norm(small), mean_squared_norm(big)
    g2 = (b_big * g_big - b_small * g_small) / (b_big - b_small)
    trace = (g_small - g_big) / (1 / b_small - 1 / b_big)
    return g2, trace


def validate(workload, model, batch: int = 64) -> dict:
    data = workload.val_dataset()
    sums: dict[str, float] = {}
    with torch.no_grad():
        for i in range(0, len(data), batch):
            x, y = data[i:i + batch]
            for k, v in workload.eval_sums(workload.forward(model, x), y).items():
                sums[k] = sums.get(k, 0.0) + v
    return workload.finalize_eval(sums)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--draws", type=int, default=16)
    p.add_argument("--small", type=int, default=32)
    p.add_argument("--big", type=int, default=512)
    p.add_argument("--header", action="store_true")
    args = p.parse_args(argv)
    if args.seed < 100:
        raise SystemExit(f"noise_scale.py: --seed {args.seed}: pilots use seeds >= 100 (the final runs' seeds are below)")
    torch.set_num_threads(1)
    raw = yaml.safe_load((HERE / "lm_pilot_base.yaml").read_text())
    raw = config.deep_merge(raw, {"seed": args.seed, "train": {"batch_per_rank": args.batch, "steps": args.steps}})
    cfg = config.validate(raw, str(HERE / "lm_pilot_base.yaml"))
    workload = build_workload(cfg.workload, cfg.seed)
    torch.manual_seed(cfg.seed * 1009)   # the harness's model-0 initialisation (test_rank_rng)
    model = workload.build_model()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.optimizer.lr)
    stream = workload.train_stream("same", 0, 1, args.batch, 1, 0, cfg.seed)
    fresh = cfg.seed + 7919
    small = workload.train_stream("same", 0, 1, args.small, 1, 0, fresh)
    big = workload.train_stream("same", 0, 1, args.big, 1, 0, fresh + 1)
    out = csv.DictWriter(sys.stdout, FIELDS)
    if args.header:
        out.writeheader()
    for step in range(args.steps + 1):
        if step % args.every == 0:
            model.eval()
            metrics = validate(workload, model)
            model.train()
            g2, trace = noise_scale(workload, model, small, big, args.small, args.big, args.draws, step * args.draws)
            out.writerow({"seed": cfg.seed, "batch": args.batch, "lr": cfg.optimizer.lr, "step": step,
                          "val_loss": f"{metrics['val_loss']:.5f}", "val_bayes_gap": f"{metrics['val_bayes_gap']:.5f}",
                          "g2": f"{g2:.6g}", "trace_sigma": f"{trace:.6g}", "b_simple": f"{trace / g2:.1f}",
                          "b_small": args.small, "b_big": args.big, "draws": args.draws})
            sys.stdout.flush()
        if step == args.steps:
            break
        inputs, targets = stream.batch(step)
        loss = workload.loss(workload.forward(model, inputs), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
