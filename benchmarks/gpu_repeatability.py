"""Is a GPU run repeatable? On CUDA, gpu_codist_check's cifar run (one model, one rank, 300 updates, the
embedded preset at a constant LR) twice uninterrupted (A, B) and once stopped by SIGTERM after its first
checkpoint and resumed (C): are their metrics rows (step, model, val loss and accuracy, train loss)
identical, and by how much do they differ? Run once, as it stands, on an H200 lent for the session
(2026-12-04, torch 2.11.0+cu130; run from the repository root with src on PYTHONPATH); its output is
results/bench/gpu_repeatability.txt (it imported gpu_codist_check through a sys.path entry then, a package
import now). docs/reliability.md quotes it."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
import yaml

from benchmarks import gpu_codist_check as g

name, algo, cfg = next(r for r in g.runs("cuda", 1) if r[0] == "cifar")
work = Path(tempfile.mkdtemp())
env = {**os.environ}
def rows(out):
    return [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if l.strip()]
res = {}
for tag in ("A", "B"):
    p = work / f"{tag}.yaml"; p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = work / tag
    rc = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(p), "--out", str(out)], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode
    res[tag] = rows(out) if rc == 0 else None
    print(tag, "exit", rc, flush=True)
row = g.check_one(name, algo, cfg, work, 120)
print("C (SIGTERM + resume):", {k: row[k] for k in ("stopped_at", "resumed_from", "exit_codes", "ok")}, flush=True)
res["C"] = rows(work / f"{name}_{algo}")
KEYS = ("step", "model", "val_loss", "val_accuracy", "train_loss")
def evals(r):
    return [tuple(x.get(k) for k in KEYS) for x in r]
for a, b in (("A", "B"), ("A", "C")):
    ea, eb = evals(res[a] or []), evals(res[b] or [])
    print(f"{a} vs {b}: rows identical (but wall_s): {ea == eb} ({len(ea)} rows)")
    for x, y in zip(ea, eb):
        print("   step", x[0], "val_loss", x[2], y[2], "diff", None if x[2] is None or y[2] is None else y[2] - x[2],
              "acc", x[3], y[3], "train", x[4], y[4])
