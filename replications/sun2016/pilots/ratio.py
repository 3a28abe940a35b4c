"""Issue 37 pilot p5: the first-round check's ratio as a function of the round length tau_EC.

For each one-model pilot run (pilot_c100_single.yaml: one local model on one shard, as E-DNN's
locals train) and each candidate tau (a multiple of the evaluation period), the check's per-seed
quantity: accuracy at step tau (the local at round 1) over accuracy at step 4 tau (E-DNN's local at
the end of a 4-round run, the shard's plateau as the check reads it). Prints one CSV row per run and
tau, then per LR and tau the mean over seeds, the sd and the one-sided 95% upper bound that the
check (noise: true) compares with 0.9.

    python replications/sun2016/pilots/ratio.py /work/res-sun/p5 > replications/sun2016/pilots/p5_ratio.csv
"""
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895}


def curve(run: Path) -> dict:
    acc = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("val_accuracy") is not None and r.get("model") == "0":
            acc[r["step"]] = r["val_accuracy"]
    return acc


def main(root: str) -> None:
    taus = [640, 960, 1280, 1920, 2560]
    by = defaultdict(list)
    print("run,lr,seed,tau,acc_tau,acc_4tau,ratio")
    for run in sorted(p for p in Path(root).iterdir() if (p / "metrics.jsonl").exists()):
        m = re.match(r"p5_lr([\d.]+)_s(\d+)", run.name)
        acc = curve(run)
        for tau in taus:
            if tau in acc and 4 * tau in acc:
                q = acc[tau] / acc[4 * tau]
                by[(m[1], tau)].append(q)
                print(f"{run.name},{m[1]},{m[2]},{tau},{acc[tau]},{acc[4 * tau]},{q:.4f}")
    print("\nlr,tau,n,mean,sd,upper95")
    for (lr, tau), qs in sorted(by.items()):
        n = len(qs)
        mean = sum(qs) / n
        sd = math.sqrt(sum((q - mean) ** 2 for q in qs) / (n - 1)) if n > 1 else float("nan")
        up = mean + T95.get(n - 1, 1.8) * sd / math.sqrt(n) if n > 1 else float("nan")
        print(f"{lr},{tau},{n},{mean:.4f},{sd:.4f},{up:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
