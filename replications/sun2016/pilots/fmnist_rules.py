"""The rules of the Fashion-MNIST pilot `cifar10_fmnist_pilot` (K = 4), applied to its curves table.

    PYTHONPATH=. python replications/sun2016/pilots/fmnist_rules.py results/embedded/sun2016/cifar10_fmnist_pilot_curves.csv

The rules are the figure's notes in ../experiments.yaml, fixed before its runs; this script only
reads them off the pipeline's table (one row per evaluation, model and seed):
1. the round: kept when EC-DNN's local model 0 at the end of round 1 is >= 0.93 of E-DNN's local
   model 0 at the end, on both seeds (else the final doubles it);
2. the run: 4 rounds unless MA-DNN's G gains more than 0.935 points over the last quarter on the
   seeds' mean (else 6 rounds);
3. the seeds: the fewest in 3-6 with 80% power for the paper's 1.87 points at the paired sd of
   EC-DNN G - MA-DNN G at the end (stats.seeds_for_power), 6 if none does.
Also printed, not used: EC-DNN's G - L gap (the premise, <= 9.08 points), E-DNN's local model at
the end (the chance bound, >= 0.384), and each series' final top-1.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from analysis.stats import seeds_for_power

TAU_EC, PAPER_GAP, ROUND_RATIO, MA_GAIN = 1920, 0.0187, 0.93, 0.00935


def curve(t: pd.DataFrame, series: str, model: str, seed: int) -> pd.Series:
    rows = t[(t.series == series) & (t.model.astype(str) == model) & (t.seed == seed)]
    return rows.set_index("step")["val_accuracy"].astype(float).sort_index()


def at(c: pd.Series, step: float) -> float:
    return float(np.interp(step, c.index.to_numpy(float), c.to_numpy(float)))


def main(path: str) -> None:
    t = pd.read_csv(path)
    seeds = sorted(int(s) for s in t.seed.unique())
    print(f"seeds {seeds}")
    for series in ("MA-DNN, K=4", "EC-DNN, K=4", "E-DNN, K=4"):
        for model in ("G", "0"):
            finals = [curve(t, series, model, s).iloc[-1] for s in seeds]
            print(f"  {series} {model}: final top-1 {', '.join(f'{v:.4f}' for v in finals)}")
    ratios = [at(curve(t, "EC-DNN, K=4", "0", s), TAU_EC) / curve(t, "E-DNN, K=4", "0", s).iloc[-1] for s in seeds]
    keep = all(r >= ROUND_RATIO for r in ratios)
    print(f"1. round: EC-DNN L at round 1 / E-DNN L at the end = {', '.join(f'{r:.3f}' for r in ratios)} "
          f"-> {'kept (20.48 shard-epochs)' if keep else 'doubled (40.96 shard-epochs)'}")
    gains = []
    for s in seeds:
        c = curve(t, "MA-DNN, K=4", "G", s)
        gains.append(c.iloc[-1] - at(c, c.index.max() * 0.75))
    more = float(np.mean(gains)) > MA_GAIN
    print(f"2. run: MA-DNN G's last-quarter gain {', '.join(f'{g:+.4f}' for g in gains)} (mean "
          f"{np.mean(gains):+.4f}, threshold {MA_GAIN}) -> {'6 rounds' if more else '4 rounds'}")
    diffs = np.array([curve(t, "EC-DNN, K=4", "G", s).iloc[-1] - curve(t, "MA-DNN, K=4", "G", s).iloc[-1]
                      for s in seeds])
    sd = float(diffs.std(ddof=1))
    n = seeds_for_power(sd, PAPER_GAP, 0.0)
    final_n = 6 if n is None or n > 6 else max(3, n)
    print(f"3. seeds: EC-DNN G - MA-DNN G = {', '.join(f'{d:+.4f}' for d in diffs)} (paired sd {sd:.4f}); "
          f"seeds_for_power -> {n} -> {final_n}{' (under-powered)' if n is None or n > 6 else ''}")
    gaps = [curve(t, "EC-DNN, K=4", "G", s).iloc[-1] - curve(t, "EC-DNN, K=4", "0", s).iloc[-1] for s in seeds]
    e_local = [round(float(curve(t, "E-DNN, K=4", "0", s).iloc[-1]), 4) for s in seeds]
    print(f"   (reported) EC-DNN G - L: {', '.join(f'{g:+.4f}' for g in gaps)} (premise <= 0.0908); "
          f"E-DNN L at the end (chance bound >= 0.384): {e_local}")


if __name__ == "__main__":
    main(sys.argv[1])
