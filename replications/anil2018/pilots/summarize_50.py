"""Issue 50's saturation pilot (the LM at batch 4,096-16,384 in bf16, and 8,192 in fp32 beside it),
from the pilot runs' metrics.jsonl (run_pilots.sh names: b<batch>_lr<lr>_s<seed>[_bf16]).

Rows, per seed:
- critical: each doubling b -> 2b in one precision, read as the regime check "sync saturated" reads it
  (analysis/regime.py critical_ratio, target b_best): the level is the b run's best val loss, ratio =
  steps(b) / steps(2b) to it; a 2b run that never reaches it gives only ratio_below = steps(b) / its length;
- last_gain: the val loss a run gains over its last quarter (from 3/4 of its updates to its end);
- precision: bf16 minus fp32 at the same batch and seed (same init, same data order): final and best.
Usage: python summarize_50.py RUNS_DIR > saturation_50.csv
"""
import json
import re
import sys
from pathlib import Path

from analysis import stats

runs = {}
for d in sorted(Path(sys.argv[1]).glob("b*_lr*_s*")):
    m = re.fullmatch(r"b(\d+)_lr([0-9.e-]+)_s(\d+)(_bf16)?", d.name)
    if not m or not (d / "summary.json").exists():
        continue
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("val_loss") is not None]
    runs[(int(m[1]), int(m[3]), "bf16" if m[4] else "fp32")] = ([r["step"] for r in rows], [r["val_loss"] for r in rows])

print("kind,seed,precision,batch,other,steps_run,value,other_value,steps,other_steps,ratio,ratio_below")
for (b, seed, prec), (steps, vals) in sorted(runs.items()):
    if (b * 2, seed, prec) in runs:
        s2, v2 = runs[(b * 2, seed, prec)]
        target = min(vals)
        tb, t2 = stats.steps_to(steps, vals, target, False), stats.steps_to(s2, v2, target, False)
        print(f"critical,{seed},{prec},{b},{b * 2},{steps[-1]},{target:.5f},{min(v2):.5f},{round(tb, 1)},"
              f"{'' if t2 is None else round(t2, 1)},{'' if t2 is None else f'{tb / t2:.4f}'},"
              f"{f'{tb / s2[-1]:.4f}' if t2 is None else ''}")
    q = min(range(len(steps)), key=lambda i: abs(steps[i] - 0.75 * steps[-1]))
    print(f"last_gain,{seed},{prec},{b},,{steps[-1]},{vals[-1]:.5f},{vals[q]:.5f},{steps[-1]},{steps[q]},"
          f"{vals[q] - vals[-1]:.5f},")
    if prec == "bf16" and (b, seed, "fp32") in runs:
        sf, vf = runs[(b, seed, "fp32")]
        print(f"precision,{seed},bf16-fp32,{b},,{steps[-1]},{vals[-1] - vf[-1]:.5f},{min(vals) - min(vf):.5f},"
              f"{steps[-1]},{sf[-1]},,")
