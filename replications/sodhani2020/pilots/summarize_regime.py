"""Pilot summary (issue 37, Sodhani): per run of run_regime.sh, what Fig. 1's regime checks measure
(experiments.yaml x-tuned, x-asymptote-*, x-epochs) and what sizes the seeds: final top-1 of model 0
(and its binomial evaluation sd sqrt(p(1-p)/n_val)), the gain over the last evaluation interval,
train and val loss at the last evaluation, the memorisation ratio (val - train loss) / train loss
(x-tuned asks <= 1), epochs, updates, the run's own wall, evaluation and set-up seconds and the load
average at its start and end (timings.txt; a timing at load >= 2 sizes nothing).
Then, per pair of arms run at the same size, epochs, weight decay, width and seed, the paired
differences (codistillation minus all-reduce; reduced-L2 minus out-of-the-box codistillation).
Usage: python summarize_regime.py RUNS_DIR > regime_runs.csv   (pairs: --pairs > regime_pairs.csv)
"""
import json
import math
import re
import statistics
import sys
from pathlib import Path

NAME = re.compile(r"(ar|cd|cdr)_n(\d+)_e(\d+)_wd([0-9.e-]+)_w(\d+)_s(\d+)")


def runs(root: Path):
    timings = {}
    tf = root / "timings.txt"
    if tf.exists():
        for line in tf.read_text().splitlines():
            name, *kv = line.split()
            timings[name] = dict(x.split("=") for x in kv)
    for d in sorted(root.iterdir()):
        m = NAME.fullmatch(d.name)
        if not m or not (d / "summary.json").exists():
            continue
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        rows = [r for r in rows if r.get("val_accuracy") is not None and str(r.get("model", "0")) == "0"]
        last, prev = rows[-1], rows[-2]
        cfg = json.loads((d / "manifest.json").read_text())["config"]
        s = json.loads((d / "summary.json").read_text())
        n_val, n_train = cfg["workload"]["val_size"], cfg["workload"]["train_size"]
        batch = cfg["train"]["batch_per_rank"] * cfg["parallel"]["world_size"] // cfg["parallel"].get("models", 1)
        p = last["val_accuracy"]
        t = timings.get(d.name, {})
        yield dict(arm=m[1], train_size=int(m[2]), epochs_arg=int(m[3]), weight_decay=m[4], width=int(m[5]),
                   seed=int(m[6]), steps=last["step"], epochs=round(last["step"] * batch / n_train, 2),
                   final_val_accuracy=round(p, 5), eval_sd=round(math.sqrt(p * (1 - p) / n_val), 5),
                   gain_last_interval=round(p - prev["val_accuracy"], 5), train_loss=round(last["train_loss"], 4),
                   val_loss=round(last["val_loss"], 4),
                   memorisation_ratio=round((last["val_loss"] - last["train_loss"]) / last["train_loss"], 3),
                   init_distance=round(last.get("init_distance") or float("nan"), 3),
                   wall_s=round(s["wall_s"], 1), eval_s=round(s["eval_s"], 1), setup_s=round(s["setup_s"], 1),
                   elapsed_s=round(s["elapsed_s"], 1), load_start=t.get("load_start", ""), load_end=t.get("load_end", ""))


def main():
    root = Path(sys.argv[1])
    rs = list(runs(root))
    if "--pairs" not in sys.argv:
        print(",".join(rs[0].keys()))
        for r in rs:
            print(",".join(str(v) for v in r.values()))
        return
    key = lambda r: (r["train_size"], r["epochs_arg"], r["weight_decay"], r["width"], r["seed"])
    by = {(r["arm"],) + key(r): r for r in rs}
    print("comparison,train_size,epochs,weight_decay,width,seed,metric,a,b,diff")
    for (a, b) in (("cd", "ar"), ("cdr", "cd"), ("cdr", "ar")):
        for k in sorted({key(r) for r in rs}):
            if (a,) + k in by and (b,) + k in by:
                for metric in ("final_val_accuracy", "train_loss", "val_loss", "init_distance"):
                    x, y = by[(a,) + k][metric], by[(b,) + k][metric]
                    print(f"{a}-{b},{','.join(map(str, k))},{metric},{x},{y},{round(x - y, 5)}")


if __name__ == "__main__":
    main()
