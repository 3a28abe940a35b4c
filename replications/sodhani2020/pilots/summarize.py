"""Pilot summary (issue 23, Sodhani): per weight decay and seed, what Fig. 1's regime checks measure on
the fig1 all-reduce (experiments.yaml x-tuned, x-l2), from the pilot runs' metrics.jsonl and manifest.json:
final val accuracy (and its best), train and val loss at the last evaluation, the memorisation ratio
(val - train loss) / train loss (x-tuned asks <= 1) and summed lr x weight decay (x-l2 asks 0.77-3.07).
Usage: python summarize.py RUNS_DIR > l2_sweep.csv
"""
import json
import re
import sys
from pathlib import Path

from analysis import regime  # noqa: E402

print("weight_decay,seed,final_val_accuracy,best_val_accuracy,train_loss,val_loss,memorisation_ratio,lr_wd_sum")
for d in sorted(Path(sys.argv[1]).glob("wd*_s*"), key=lambda p: (float(p.name[2:].split("_s")[0]), p.name)):
    m = re.fullmatch(r"wd([0-9.e-]+)_s(\d+)", d.name)
    if not m or not (d / "summary.json").exists():
        continue
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("val_accuracy") is not None and str(r.get("model", "0")) == "0"]
    last = rows[-1]
    cfg = json.loads((d / "manifest.json").read_text())["config"]
    ratio = (last["val_loss"] - last["train_loss"]) / last["train_loss"]
    print(f"{m[1]},{m[2]},{last['val_accuracy']:.4f},{max(r['val_accuracy'] for r in rows):.4f},"
          f"{last['train_loss']:.4f},{last['val_loss']:.4f},{ratio:.3f},{regime.lr_wd_sum(cfg):.4f}")
