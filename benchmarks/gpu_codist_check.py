"""`make gpu-check`, first part: codist's own loop on the GPU, the way a full-scale run uses it.

    python benchmarks/gpu_codist_check.py                  # CUDA when torch sees a GPU, else the CPU (says so)

First the stack: torch, its CUDA and NCCL against env/requirements.lock's pins (a mismatch fails the
check). For each workload family (the embedded presets of cifar, ctr, lm, translation, and the imagenet
workload's embedded images) one `codist run` of two models, one rank each (codistillation's
checkpoint exchange; cifar also EC-DNN's ensemble-and-compress rounds): the engine or local update,
the communication meter, the stop-signal agreement every 10 updates, evaluation, a checkpoint, then
SIGTERM after the first checkpoint (exit 3) and the same command again, which must resume from it and
finish (exit 0, `resumed_from_step` > 0 in its manifest). A run that does not finish so is a failure
line with its log's end. On CUDA each run has a few hundred updates over NCCL with two GPUs; with one,
NCCL cannot put two ranks on it, so the two ranks share it over gloo (launch.backend: gloo, CUDA
tensors staged through host memory): the multi-rank path (process groups, the exchanges, the stop
agreement, the checkpoint of two ranks) on CUDA tensors, not NCCL, and the report says so. On a
CPU-only machine the same script runs tiny runs on the CPU over gloo and says so. Then
benchmarks/gpu_check.py's throughput table (CUDA), or its CPU smoke run. Results:
results/bench/codist_check_<device>.csv (the CPU file is
a smoke test's, not a GPU measurement: not committed).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "replications" / "presets" / "embedded"
COLUMNS = ["workload", "algorithm", "device", "backend", "world_size", "steps", "stopped_at", "resumed_from",
           "exit_codes",
           "final_metric", "seconds", "ok", "note", "date"]


def runs(device: str, gpus: int) -> list[tuple[str, str, dict]]:
    """(workload, algorithm, run config) of the check."""
    steps = 300 if device == "cuda" else 40
    backend = "gloo" if device == "cuda" and gpus < 2 else "auto"   # one GPU: two ranks share it over gloo
    out = []
    families = [("cifar", PRESETS / "cifar.yaml"), ("ctr", PRESETS / "ctr.yaml"), ("lm", PRESETS / "lm.yaml"),
                ("translation", PRESETS / "translation.yaml"), ("imagenet", None)]
    for name, preset in families:
        base = yaml.safe_load(preset.read_text()) if preset else {
            "workload": {"name": "imagenet", "dataset": "embedded"}, "optimizer": {"name": "sgd", "lr": 0.1}}
        base.pop("source", None)
        algos = [("codistill", {"name": "codistill", "exchange_every": max(5, steps // 10)})]
        if name == "cifar":
            algos.append(("ensemble_compress", {"name": "ensemble_compress", "tau": max(5, steps // 4)}))
        for algo, section in algos:
            cfg = {**base, "name": f"gpu-check {name} {algo}", "algorithm": section,
                   "parallel": {"world_size": 2, "models": 2},
                   "schedule": {"name": "constant"},
                   "train": {**base.get("train", {}), "steps": steps, "eval_every": max(5, steps // 3),
                             "checkpoint_every": max(2, steps // 6), "save_model": False},
                   "launch": {"device": device, "launcher": "torchrun" if device == "cuda" else "warm",
                              "threads_per_rank": 1 if device == "cpu" else 4, "backend": backend}}
            if device == "cpu":   # tiny: the same code path in seconds
                cfg["train"]["batch_per_rank"] = min(cfg["train"].get("batch_per_rank", 32), 16)
                cfg["train"]["eval_batch"] = 64
            out.append((name, algo, cfg))
    return out


def stack() -> tuple[str, bool]:
    """(a line naming torch, its CUDA and NCCL against env/requirements.lock's pins, whether they match):
    a GPU check of another torch or NCCL than the lock's measures another stack. The local version
    label (+cu130, +cu126: the CUDA 12 route) is not compared; NCCL wherever the lock's NCCL wheel is
    installed, at any version (the CUDA 12 route, without it, brings its own)."""
    from importlib import metadata

    import torch
    pins = dict(line.split("==", 1) for line in (ROOT / "env" / "requirements.lock").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    nccl_pkg = next((k for k in pins if k.startswith("nvidia-nccl-")), None)
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
    try:
        nccl_installed = metadata.version(nccl_pkg) if nccl_pkg else None
    except metadata.PackageNotFoundError:
        nccl_installed = None
    ok = torch.__version__.split("+")[0] == pins.get("torch") and (
        nccl_installed is None or nccl_installed == nccl == pins.get(nccl_pkg))
    line = (f"torch {torch.__version__} (lock: {pins.get('torch')}), CUDA {torch.version.cuda}, NCCL {nccl} "
            f"(lock: {nccl_pkg} {pins.get(nccl_pkg)}, installed {nccl_installed})")
    return line, ok


def codist_run(cfg_path: Path, out: Path, log, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "codist.cli", "run", str(cfg_path), "--out", str(out)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=False)


def check_one(name: str, algo: str, cfg: dict, work: Path, timeout: float) -> dict:
    from codist import config
    cfg_path = work / f"{name}_{algo}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    config.load(cfg_path)   # a config error is the check's own fault: fail loudly here
    out, log_path = work / f"{name}_{algo}", work / f"{name}_{algo}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0, codes, stopped, note = time.perf_counter(), [], None, ""
    with log_path.open("w") as log:
        proc = codist_run(cfg_path, out, log, env)
        latest = out / "checkpoint" / "latest.json"
        while proc.poll() is None and time.perf_counter() - t0 < timeout:
            if latest.exists():
                try:
                    stopped = json.loads(latest.read_text())["step"]
                except (ValueError, KeyError):
                    stopped = None
                if stopped:
                    proc.send_signal(signal.SIGTERM)   # checkpoint and exit 3, as on preemption
                    break
            time.sleep(0.05)
        try:
            codes.append(proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - t0))))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
            note = "timed out"
        if codes == [3]:
            codes.append(codist_run(cfg_path, out, log, env).wait(timeout=timeout))
    seconds = time.perf_counter() - t0
    resumed, metric = None, ""
    try:
        resumed = json.loads((out / "manifest.json").read_text()).get("resumed_from_step")
        summary = json.loads((out / "summary.json").read_text())
        metric = json.dumps(summary.get("final", summary.get("models", "")))[:120]
    except (OSError, ValueError):
        pass
    ok = codes == [3, 0] and bool(resumed)
    if not ok and not note:
        note = (f"expected exit codes [3, 0] and a resume; the log ends: "
                + " | ".join(log_path.read_text(errors="replace").splitlines()[-6:]))[:600]
    backend = ""
    try:   # what the ranks' process group ran on, from the manifest (nccl, or gloo)
        backend = json.loads((out / "manifest.json").read_text())["backend"]
    except (OSError, ValueError, KeyError):
        pass
    return {"workload": name, "algorithm": algo, "device": cfg["launch"]["device"], "backend": backend,
            "world_size": cfg["parallel"]["world_size"], "steps": cfg["train"]["steps"], "stopped_at": stopped,
            "resumed_from": resumed, "exit_codes": " ".join(map(str, codes)), "final_metric": metric,
            "seconds": round(seconds, 1), "ok": ok, "note": note, "date": datetime.date.today().isoformat()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    p.add_argument("--no-throughput", action="store_true", help="skip benchmarks/gpu_check.py's table")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run")
    p.add_argument("--out", default=None, help="CSV (default results/bench/codist_check_<device>.csv)")
    args = p.parse_args(argv)
    import torch
    line, pinned = stack()
    print(f"gpu-check: {line}{'' if pinned else ': NOT the lock pins (another stack is measured)'}", flush=True)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    if device == "cpu":
        print("gpu-check: no CUDA device here: running the same checks on the CPU (tiny runs over gloo); "
              "they check codist's loop, not a GPU", flush=True)
    elif gpus < 2:
        print(f"gpu-check: {gpus} GPU: NCCL cannot put two ranks on one GPU, so each run's two ranks share it "
              f"over gloo (CUDA tensors through host memory): the multi-rank path on CUDA, not NCCL; a machine "
              f"with >= 2 GPUs runs them over NCCL", flush=True)
    wanted = {w for w in args.only.split(",") if w}
    rows = []
    with tempfile.TemporaryDirectory(prefix="codist-gpu-check-") as tmp:
        for name, algo, cfg in runs(device, gpus):
            if wanted and name not in wanted:
                continue
            row = check_one(name, algo, cfg, Path(tmp), args.timeout)
            rows.append(row)
            print(f"{name:>12} {algo:>18} {row['device']} x{row['world_size']} {row['backend']}: "
                  f"{'ok' if row['ok'] else 'FAILED'}  stopped at {row['stopped_at']}, resumed from "
                  f"{row['resumed_from']}, exits {row['exit_codes']}  [{row['seconds']} s]"
                  + (f"  {row['note']}" if row["note"] else ""), flush=True)
    from benchmarks import gpu_check
    out = Path(args.out or ROOT / "results" / "bench" / f"codist_check_{device}.csv")
    gpu_check.write_csv(out, COLUMNS, rows)
    failed = sum(not r["ok"] for r in rows) + (not pinned)
    if not args.no_throughput:
        # CUDA: 3 blocks of 30 timed steps per model and precision (the H200's 24 rows of one 30-step block
        # took 27.5 s timed in all: results/bench/gpu_throughput.csv), so the check fits a few minutes of a
        # lent GPU; the CPU: the smoke run
        extra = ["--steps", "30", "--repeats", "3"] if device == "cuda" else [
            "--device", "cpu", "--steps", "2", "--batch", "2", "--models", "cifar_resnet20",
            "--out", str(out.with_name("gpu_throughput_cpu.csv"))]
        failed += gpu_check.main(extra) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
