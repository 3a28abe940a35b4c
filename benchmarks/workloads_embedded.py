"""Each workload's embedded default, trained once: wall time and final metric against its
limit (the Bayes-optimal value where the generator makes it computable).

    python benchmarks/workloads_embedded.py [--out results/bench]

Runs replications/presets/embedded/<workload>.yaml with `codist run` (the real launcher) and
writes results/bench/workloads_embedded.csv.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

from codist import config
from codist.launching import launch
from codist.workloads import build_workload

PRESETS = Path(__file__).resolve().parents[1] / "replications" / "presets" / "embedded"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/bench")
    p.add_argument("--only", nargs="*", default=None, help="workload names (default: all presets)")
    args = p.parse_args()
    rows = []
    for preset in sorted(PRESETS.glob("*.yaml")):
        if args.only and preset.stem not in args.only:
            continue
        cfg = config.load(preset)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            if launch.run(cfg, out) != 0:
                raise SystemExit(f"{preset}: run failed")
            s = json.loads((out / "summary.json").read_text())
        final = s["models"][s["headline_model"]]["final"]
        facts = build_workload(cfg.workload, cfg.seed).describe()   # what the generator makes known
        limits = {f"limit_{k}": v for k, v in facts.items() if "bayes" in k or k.startswith("map_")}
        limits.update({k: v for k, v in final.items() if "bayes" in k})
        rows.append({"workload": preset.stem, "metric": s["metric"], "final": s["final_metric"],
                     "best": s["best_metric"], "target": s["target"], "steps": s["steps"],
                     "train_wall_s": s["wall_s"], "eval_s": s["eval_s"], "setup_s": s["setup_s"],
                     "run_elapsed_s": s["elapsed_s"], **limits})
        print(rows[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "workloads_embedded.csv", index=False)
    print(df.to_markdown(index=False))


if __name__ == "__main__":
    main()
