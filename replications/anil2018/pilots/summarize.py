"""Pilot summary (issue 23, Anil): sync SGD's steps to a fixed level at several batches per rank
(2x, 4x, ... = workers folded into one rank's batch), from the pilot runs' metrics.jsonl.

Per workload (lm: the embedded LM, val_loss; img: the ImageNet stand-in, val_accuracy) and seed,
the target is the best value the batch-32 run reaches (the level of a speedup claim's "b_best").
ratio_to_half_batch = steps(b / 2) / steps(b) for each doubling (2 = perfect scaling, 1 = past
the critical batch). Usage: python summarize.py RUNS_DIR > critical_batch.csv

With `--target half_best` (issue 37: the saturation check's own target), each doubling b/2 -> b is
read as the regime check "sync saturated" reads it (analysis/regime.py, quantity critical_ratio,
target b_best): the level is the b/2 run's best value, ratio = steps(b/2) / steps(b) to it; no
batch-32 run is needed. Usage: python summarize.py --target half_best RUNS_DIR > critical_batch_37.csv
"""
import json
import re
import sys
from pathlib import Path

from analysis import stats  # noqa: E402

args = sys.argv[1:]
half_best = args[:2] == ["--target", "half_best"]
runs = {}
for d in sorted(Path(args[-1]).glob("*b*_lr*_s*")):
    m = re.fullmatch(r"(img_)?b(\d+)_lr([0-9.e-]+)_s(\d+)", d.name)
    if not m or not (d / "summary.json").exists():
        continue
    summary = json.loads((d / "summary.json").read_text())
    metric, higher = summary["metric"], summary["higher_is_better"]
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get(metric) is not None]
    runs[("img" if m[1] else "lm", int(m[2]), int(m[4]))] = (
        m[3], metric, higher, [r["step"] for r in rows], [r[metric] for r in rows], rows[-1]["wall_s"] / rows[-1]["step"])
if half_best:
    # (no s/update: these pilots ran at load 9-19 and their timings decide nothing)
    print("workload,batch,lr,seed,metric,steps_run,final,best,half_batch_best,steps_half_batch,steps_to_it,"
          "ratio_to_half_batch,ratio_below")
    for (w, b, seed), (lr, metric, higher, steps, vals, spu) in sorted(runs.items()):
        half = runs.get((w, b // 2, seed))
        if half is None:
            continue
        target = max(half[4]) if higher else min(half[4])
        th = stats.steps_to(half[3], half[4], target, higher)
        t = stats.steps_to(steps, vals, target, higher)
        ratio = f"{th / t:.4f}" if (t and th) else ""
        best = max(vals) if higher else min(vals)
        print(f"{w},{b},{lr},{seed},{metric},{steps[-1]},{vals[-1]:.5f},{best:.5f},{target:.5f},{round(th, 1)},"
              f"{'' if t is None else round(t, 1)},{ratio},"
              # never reached in its run (censored): the ratio is below steps(b/2) / the run's length
              f"{'' if t is not None else f'{th / steps[-1]:.4f}'}")
    sys.exit(0)
print("workload,batch,lr,seed,metric,steps_run,final,target,steps_to_target,ratio_to_half_batch,s_per_update")
for (w, b, seed), (lr, metric, higher, steps, vals, spu) in sorted(runs.items()):
    base = runs.get((w, 32, seed))
    if base is None:
        continue
    target = max(base[4]) if higher else min(base[4])
    t = stats.steps_to(steps, vals, target, higher)
    half = runs.get((w, b // 2, seed))
    th = stats.steps_to(half[3], half[4], target, higher) if half else None
    ratio = f"{th / t:.4f}" if (t and th) else ""
    print(f"{w},{b},{lr},{seed},{metric},{steps[-1]},{vals[-1]:.5f},{target:.5f},"
          f"{'' if t is None else round(t, 1)},{ratio},{spu:.4f}")
