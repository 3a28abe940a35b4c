"""Checkpoint cost: size on disk, write time, and resume overhead, for the embedded workloads
and for ResNet-50 (torchvision, 25.6M parameters, on tiny embedded images: the checkpoint's
size and write time depend on the model, not the data).

Each case runs once with a checkpoint halfway (fresh run), then its summary.json is removed
and the same command is run again, which resumes from that checkpoint. Resume overhead =
`resume_load_s`, the time the resumed run spends reading and applying the checkpoint (model,
optimizer, algorithm state, RNG, counters); launch-to-first-update of both runs is listed too,
but process start-up (~10 s of imports) varies by more than the load itself.

    python benchmarks/checkpoint_cost.py [--out results/bench]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

from codist import config
from codist.launching import launch

PRESETS = Path(__file__).resolve().parents[1] / "replications" / "presets" / "embedded"
CASES = {
    "cifar (resnet8 w16)": (PRESETS / "cifar.yaml", []),
    "lm (2x64 LSTM)": (PRESETS / "lm.yaml", []),
    "ctr (MLP 64-32)": (PRESETS / "ctr.yaml", []),
    "translation (tiny transformer)": (PRESETS / "translation.yaml", []),
    "ResNet-50 (torchvision)": (PRESETS / "cifar.yaml", [
        "workload={name: imagenet, arch: resnet50, classes: 1000, train_size: 64, val_size: 8}",
        "train.batch_per_rank=2", "train.eval_batch=8"]),
}
STEPS = 20


def size_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    rows = []
    for name, (preset, extra) in CASES.items():
        cfg = config.load(preset, [*extra, f"train.steps={STEPS}", f"train.eval_every={STEPS}",
                                   f"train.checkpoint_every={STEPS // 2}", "train.save_model=false"])
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            assert launch.run(cfg, out) == 0
            fresh = json.loads((out / "summary.json").read_text())
            ckpt = size_bytes(out / "checkpoint")
            (out / "summary.json").unlink()
            assert launch.run(cfg, out) == 0
            resumed = json.loads((out / "summary.json").read_text())
        assert resumed["resumed_from_step"] == STEPS // 2
        rows.append({"case": name, "checkpoint_bytes": ckpt, "write_s": fresh["checkpoint_s"] / fresh["checkpoints"],
                     "resume_load_s": resumed["resume_load_s"],
                     "fresh_setup_s": fresh["setup_s"], "resumed_setup_s": resumed["setup_s"]})
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    df.to_csv(Path(args.out) / "checkpoint_cost.csv", index=False)
    print(df.to_markdown(index=False))


if __name__ == "__main__":
    main()
