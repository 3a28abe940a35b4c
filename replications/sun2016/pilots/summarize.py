"""Pilot summary (issue 23): per pilot run folder and evaluation step, the mean validation accuracy
of the local models (models 0..K-1) and of G, as one CSV on stdout.

    python replications/sun2016/pilots/summarize.py /work/res-sun/pilots > replications/sun2016/pilots/pilots.csv
"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path


def rows(run: Path):
    acc = defaultdict(dict)
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("val_accuracy") is not None:
            acc[r["step"]][r["model"]] = r["val_accuracy"]
    for step in sorted(acc):
        local = [v for m, v in acc[step].items() if m.isdigit()]
        yield {"run": run.name, "step": step, "models": len(local),
               "local_mean": round(sum(local) / len(local), 4), "local_0": acc[step].get("0"),
               "G": acc[step].get("G", "")}


def main(root: str) -> None:
    out = csv.DictWriter(sys.stdout, ["run", "step", "models", "local_mean", "local_0", "G"])
    out.writeheader()
    for run in sorted(p for p in Path(root).iterdir() if (p / "metrics.jsonl").exists()):
        out.writerows(rows(run))


if __name__ == "__main__":
    main(sys.argv[1])
