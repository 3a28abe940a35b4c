"""Per-run start-up, cold vs warm: the time from `codist run`'s process start to the first
update (`setup_s` in summary.json), per launcher, at 1 and 2 ranks.

    python benchmarks/startup.py [--repeats 5] [--out results/bench]

Each run is a real `codist run` process (the CLI's own interpreter start and imports count)
of a short embedded run (the image task of the replications, 20 updates), so `setup_s` holds
everything before training: interpreter and imports, launcher, process group, data, engine.
Launchers: `deepspeed` (the default; at 1 rank `codist run` starts the rank itself), `torchrun`,
`fork` (imports once per run, ranks forked), `warm` (ranks forked from a server that keeps the
imports between runs). The warm server gets a private runtime folder: its first run pays the
server's start (reported apart as `warm (first run: server starts)`), the others reuse it; the
server is stopped at the end. The embedded data set is cached on disk (codist.workloads.generated_cache)
in a private folder that the untimed first run fills, so every timed run loads it, as every run of
a replication after the first of its data set does.

Writes results/bench/startup.csv (median, min, max per launcher and world size, with the load
average) and startup_raw.csv (every run).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from benchmarks import benchlib
from codist.launching.warm_client import stop_servers

RUN = {"workload": {"name": "cifar", "dataset": "embedded", "arch": "resnet8", "width": 8, "image_size": 12,
                    "train_size": 2000, "val_size": 500},
       "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
       "train": {"steps": 20, "batch_per_rank": 32, "eval_every": 20, "save_model": False},
       "launch": {"device": "cpu", "threads_per_rank": 1}}
LAUNCHERS = ("deepspeed", "torchrun", "fork", "warm")


def one_run(folder: Path, launcher: str, world: int, rep: int, env: dict) -> dict:
    raw = benchlib.merge(RUN, {"parallel": {"world_size": world}, "launch": {"launcher": launcher}})
    path = folder / f"{launcher}-{world}-{rep}.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = folder / path.stem
    load = benchlib.loadavg()
    done = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{path}: codist run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    s = json.loads((out / "summary.json").read_text())
    return {"launcher": launcher, "world_size": world, "repeat": rep, "setup_s": s["setup_s"],
            "wall_s": s["wall_s"], "elapsed_s": s["elapsed_s"], "loadavg": load}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="codist-startup-") as tmp:
        folder = Path(tmp)
        runtime = folder / "xdg"
        runtime.mkdir()
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "CODIST_CACHE_DIR": str(folder / "cache")}
        try:
            # untimed: DeepSpeed's CPU comm op is compiled once per machine (~1 min), not per run; the
            # data set is generated and cached once
            one_run(folder, "fork", 2, -1, env)
            for world in args.worlds:
                for launcher in LAUNCHERS:
                    for rep in range(args.repeats + (launcher == "warm")):
                        row = one_run(folder, launcher, world, rep, env)
                        if launcher == "warm" and rep == 0:
                            row["launcher"] = "warm (first run: server starts)"
                        rows.append(row)
                        print(row, flush=True)
                    if launcher == "warm":   # each world size's warm series starts with a new server
                        stop_servers(runtime)
        finally:
            stop_servers(runtime)
    raw = pd.DataFrame(rows)
    table = (raw.groupby(["world_size", "launcher"], sort=False)
             .agg(runs=("setup_s", "size"), median_setup_s=("setup_s", "median"), min_setup_s=("setup_s", "min"),
                  max_setup_s=("setup_s", "max"), median_elapsed_s=("elapsed_s", "median"),
                  loadavg_max=("loadavg", "max"))
             .reset_index().round(3))
    benchlib.write_csv(raw, args.out, "startup_raw.csv")
    benchlib.write_csv(table, args.out, "startup.csv")
    print(table.to_markdown(index=False))
    warm = raw[raw.launcher == "warm"].setup_s
    print(f"warm start-up over all runs: median {statistics.median(warm):.3f} s")


if __name__ == "__main__":
    main()
