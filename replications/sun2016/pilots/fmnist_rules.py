"""The rules of the Fashion-MNIST pilots of Sun's 10-class claims, applied to a pilot's curves table:

    PYTHONPATH=. python replications/sun2016/pilots/fmnist_rules.py results/embedded/sun2016/cifar10_fmnist_pilot_curves.csv
    PYTHONPATH=. python replications/sun2016/pilots/fmnist_rules.py --k 8 results/embedded/sun2016/cifar10_fmnist_k8_pilot_curves.csv

The rules are the figures' notes in ../experiments.yaml, each fixed before its pilot's runs; this
script only reads them off the pipeline's table (one row per evaluation, model and seed):
1. the round: kept when EC-DNN's local model 0 at the end of round 1 is >= 0.93 of E-DNN's local
   model 0 at the end, on both seeds (else the final doubles it);
3. the seeds: the fewest in 3-6 with 80% power for the paper's gap (1.87 points at K = 4, 1.80 at
   K = 8) at the paired sd of EC-DNN G - MA-DNN G at the end (stats.seeds_for_power), 6 if none does;
2. the run: 4 rounds unless MA-DNN's G gains more than the plateau check's threshold (0.935 points
   at K = 4, 0.90 at K = 8) over the last quarter, else 6 rounds. K = 4 (cifar10_fmnist_pilot) read
   the seeds' mean; K = 8 (cifar10_fmnist_k8_pilot, written after the K = 4 final left its plateau
   check open) reads the mean projected to the final's seeds: mean + t(0.95, n - 1) sd / sqrt(n).
Also printed, not used: EC-DNN's G - L gap (the premise, <= 9.08 / 11.58 points), E-DNN's local
model at the end (the chance bound, >= 0.384), and each series' final top-1.
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from analysis.stats import seeds_for_power, t_quantile

ROUND_RATIO = 0.93
# K: (tau_EC in updates, the paper's EC-DNN G - MA-DNN G gap, the plateau check's threshold, the premise's bound)
BY_K = {4: (1920, 0.0187, 0.00935, 0.0908), 8: (960, 0.0180, 0.0090, 0.1158)}


def curve(t: pd.DataFrame, series: str, model: str, seed: int) -> pd.Series:
    rows = t[(t.series == series) & (t.model.astype(str) == model) & (t.seed == seed)]
    return rows.set_index("step")["val_accuracy"].astype(float).sort_index()


def at(c: pd.Series, step: float) -> float:
    return float(np.interp(step, c.index.to_numpy(float), c.to_numpy(float)))


def main(path: str, k: int) -> None:
    tau_ec, paper_gap, ma_gain, premise = BY_K[k]
    ma, ec, e = (f"{name}, K={k}" for name in ("MA-DNN", "EC-DNN", "E-DNN"))
    t = pd.read_csv(path)
    seeds = sorted(int(s) for s in t.seed.unique())
    print(f"seeds {seeds}")
    for series in (ma, ec, e):
        for model in ("G", "0"):
            finals = [curve(t, series, model, s).iloc[-1] for s in seeds]
            print(f"  {series} {model}: final top-1 {', '.join(f'{v:.4f}' for v in finals)}")
    ratios = [at(curve(t, ec, "0", s), tau_ec) / curve(t, e, "0", s).iloc[-1] for s in seeds]
    keep = all(r >= ROUND_RATIO for r in ratios)
    print(f"1. round: EC-DNN L at round 1 / E-DNN L at the end = {', '.join(f'{r:.3f}' for r in ratios)} "
          f"-> {'kept (20.48 shard-epochs)' if keep else 'doubled (40.96 shard-epochs)'}")
    diffs = np.array([curve(t, ec, "G", s).iloc[-1] - curve(t, ma, "G", s).iloc[-1] for s in seeds])
    sd = float(diffs.std(ddof=1))
    n = seeds_for_power(sd, paper_gap, 0.0)
    final_n = 6 if n is None or n > 6 else max(3, n)
    print(f"3. seeds: EC-DNN G - MA-DNN G = {', '.join(f'{d:+.4f}' for d in diffs)} (paired sd {sd:.4f}); "
          f"seeds_for_power -> {n} -> {final_n}{' (under-powered)' if n is None or n > 6 else ''}")
    gains = []
    for s in seeds:
        c = curve(t, ma, "G", s)
        gains.append(c.iloc[-1] - at(c, c.index.max() * 0.75))
    mean = float(np.mean(gains))
    read = mean if k == 4 else mean + t_quantile(final_n) * float(np.std(gains, ddof=1)) / math.sqrt(final_n)
    how = "mean" if k == 4 else f"mean projected to {final_n} seeds"
    print(f"2. run: MA-DNN G's last-quarter gain {', '.join(f'{g:+.4f}' for g in gains)} ({how} "
          f"{read:+.4f}, threshold {ma_gain}) -> {'6 rounds' if read > ma_gain else '4 rounds'}")
    gaps = [curve(t, ec, "G", s).iloc[-1] - curve(t, ec, "0", s).iloc[-1] for s in seeds]
    e_local = [round(float(curve(t, e, "0", s).iloc[-1]), 4) for s in seeds]
    print(f"   (reported) EC-DNN G - L: {', '.join(f'{g:+.4f}' for g in gaps)} (premise <= {premise}); "
          f"E-DNN L at the end (chance bound >= 0.384): {e_local}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", help="the pilot's <figure>_curves.csv")
    parser.add_argument("--k", type=int, choices=sorted(BY_K), default=4)
    args = parser.parse_args()
    main(args.curves, args.k)
