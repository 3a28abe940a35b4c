r"""Projected step time on a two-tier network: an alpha-beta cost model applied to measured compute
time per update and measured bytes, for 8-256 workers, and the speedup of codistillation,
MA-DNN and EC-DNN over all-reduce as the bandwidth between groups falls.

    python benchmarks/projected_walltime.py [--fast-GBps 100] [--alpha-fast-us 5] [--alpha-slow-us 50]
        [--out results/bench]

Why: on this 2-core machine every rank shares one memory, so communication costs nothing and
the papers' reason for codistillation (Anil, Sodhani: all-reduce stops scaling; Sun: fewer
communication rounds) cannot show in a wall clock. The model makes the bytes the meter counts
into seconds on a network we describe, and says which assumptions drive the answer.

The model (the layout of the two groups, the cost of each collective, the step time per update
of each algorithm, the bytes it reports) is analysis/alpha_beta.py's `project`; this script adds
the speedup of X: the step time of all-reduce / the step time of X (same per-worker batch:
updates per second, not time to accuracy).

Inputs, all measured:
- Embedded workloads (cifar, lm, ctr): C = median over seeds of wall_s / steps of each
  algorithm's real run in results/bench/time_to_target_runs.csv (benchmarks/time_to_target.py),
  all at 2 processes x 1 thread on 2 cores with the same per-rank batch: all-reduce from its
  2-rank run, codistill / MA-DNN / EC-DNN from their 2 models x 1 rank runs. The 1-rank run
  is not used: a lone process runs 15-20% faster than each of two on this machine (shared
  caches and memory bandwidth), which would be charged to the algorithms. C therefore
  includes each run's own communication over shared memory (a 2-rank gradient all-reduce of
  P every update for all-reduce, the exchanges for the others: at most a few percent of C);
  the model then adds the network's cost on top. The runs were timed on a shared machine:
  differences of ~10% between algorithms that compute the same (all-reduce and MA-DNN) are
  noise. P and S are the bytes the meter counted in those runs
  (all-reduce x2: P per update; codistill: S per exchange), checked against the closed form
  of the workload's model. Periods are those runs': codistill k = 50, MA-DNN tau = 16, EC-DNN
  tau = the preset's eval_every.
- ResNet-50: P and S from results/bench/comm_volume.csv (the meter's counts, equal to the
  closed form there). C is published, not measured here: NVIDIA DeepLearningExamples,
  PyTorch ResNet-50 v1.5, 1 x V100 16 GB, FP32: 367 images/s (README "Training performance:
  NVIDIA DGX-1 16GB", pytorch-21.03 container), so 32 images per GPU (Sodhani) take
  32/367 = 87 ms. Codistillation's extra teacher forward and EC-DNN's K teacher forwards are
  charged 1/3 of a training step each (a forward pass is about a third of forward + backward
  FLOPs); MA-DNN computes what all-reduce computes. Periods: codistill k = 50 (Anil) and
  2500 (Sodhani), MA-DNN tau = 16, EC-DNN tau = 4000 (Sun).

Network values (assumptions, change them with the flags): fast tier 100 GB/s per direction
per worker, 5 us per message (NVLink-class: a V100's NVLink 2 gives 150 GB/s per direction,
an A100's 300; a group larger than a node needs a non-blocking fabric of that class for this
to hold, otherwise lower --fast-GBps); slow tier 1, 10, 100 Gb/s per worker (the table) and a
sweep from 0.1 to 1000 Gb/s (the plot), 50 us per message (TCP over datacenter Ethernet).
Latency matters for small models at large p: the flat ring pays 2(p-1) alpha_s per update.

Writes results/bench/projected_walltime.csv (scenario x slow-link model x algorithm x p in
8..256 x slow bandwidth in {1, 10, 100} Gb/s) and results/bench/projected_walltime.png
(speedup per update over all-reduce against the between-group bandwidth, p = 8, 64, 256;
columns: per-worker links over the flat ring, per-worker links over the hierarchical
all-reduce, one shared link over the hierarchical all-reduce; rows: embedded cifar with
measured compute, ResNet-50 with published compute).
"""
from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.alpha_beta import project, ring_bytes
from benchmarks import benchlib

WORKERS = (8, 16, 32, 64, 128, 256)
TABLE_GBPS = (1.0, 10.0, 100.0)
PLOT_P = (8, 64, 256)
RESNET50_V100_FP32_IMG_S = 367.0       # NVIDIA DeepLearningExamples ResNet-50 v1.5 PyTorch, 1x V100 16GB FP32
RESNET50_BATCH = 32                    # Sodhani: 32 images per GPU
FORWARD_FRACTION = 1.0 / 3.0           # forward / (forward + backward), FLOP estimate
TTT_ALGOS = {"allreduce": "allreduce x2", "codistill": "codistill 2x1", "model_average": "model_average K=2",
             "ensemble_compress": "ensemble_compress K=2"}


# --------------------------------------------------------------------------- measured inputs

def model_bytes(workload: str) -> tuple[int, int]:
    """(P, S) of an embedded preset's model, by the closed form (fp32 parameters; + float buffers)."""
    from codist import config
    from codist.algorithms.state import flat_state
    from codist.workloads import build_workload
    cfg = config.validate(benchlib.preset(workload), workload)
    net = build_workload(cfg.workload, cfg.seed).build_model()
    return sum(q.numel() for q in net.parameters()) * 4, flat_state(net).numel() * 4


def period(workload: str, name: str) -> int:
    """The exchange period a time_to_target run used (its own definition, not a copy)."""
    from benchmarks.time_to_target import ALGORITHMS
    a = ALGORITHMS[name](workload, benchlib.preset(workload))["algorithm"]
    return a.get("exchange_every") or a["tau"]


def embedded_scenarios(runs: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """One scenario per embedded workload found in time_to_target_runs.csv, and the checks of the
    measured bytes against the closed form."""
    scen, checks = [], []
    runs = runs[runs.model == "0"]
    for w, g in runs.groupby("workload", sort=False):
        if not all(a in set(g.algorithm) for a in list(TTT_ALGOS.values()) + ["allreduce x2"]):
            continue
        P, S = model_bytes(w)
        ar2 = g[g.algorithm == "allreduce x2"].iloc[0]
        cd = g[g.algorithm == "codistill 2x1"].iloc[0]
        ma = g[g.algorithm == "model_average K=2"].iloc[0]
        ec = g[g.algorithm == "ensemble_compress K=2"].iloc[0]
        steps = int(ar2.steps)
        P_meas = ar2.grad_allreduce_within_sent_bytes_all_ranks / (2 * steps)     # ring at 2 ranks: P per rank
        k, tau_ma, tau_ec = (period(w, TTT_ALGOS[a]) for a in ("codistill", "model_average", "ensemble_compress"))
        S_meas = cd.param_exchange_between_sent_bytes_all_ranks / (2 * math.ceil(int(cd.steps) / k))
        ma_meas = ma.model_average_between_sent_bytes_all_ranks / (2 * (int(ma.steps) // tau_ma))
        ec_meas = ec.param_exchange_between_sent_bytes_all_ranks / (2 * (int(ec.steps) // tau_ec))
        for what, meas, closed in (("P (all-reduce x2, per update)", P_meas, P),
                                   ("S (codistill, per exchange)", S_meas, S),
                                   ("S (MA-DNN, per round)", ma_meas, ring_bytes(S, 2)),
                                   ("S (EC-DNN, per round)", ec_meas, S)):
            checks.append({"workload": w, "quantity": what, "measured_bytes": meas, "closed_form_bytes": closed,
                           "equal": meas == closed})
        C = {a: statistics.median(g[g.algorithm == name].step_ms) / 1000 for a, name in TTT_ALGOS.items()}
        scen.append({"scenario": f"{w} embedded", "compute_source": "measured here: median wall_s/steps of the "
                     "time_to_target runs", "P": P_meas, "S": S_meas, "C": C, "batch_per_rank": int(ar2.batch_per_rank),
                     "periods": {"codistill": [k], "model_average": [tau_ma], "ensemble_compress": [tau_ec]}})
    return scen, checks


def resnet50_scenario(comm: pd.DataFrame) -> dict:
    r = comm[comm.model == "resnet50"].iloc[0]
    step = RESNET50_BATCH / RESNET50_V100_FP32_IMG_S
    return {"scenario": "ResNet-50 (V100 FP32, published)",
            "compute_source": f"published: {RESNET50_V100_FP32_IMG_S:.0f} img/s on 1x V100 FP32 (NVIDIA "
                              f"DeepLearningExamples ResNet-50 v1.5) x {RESNET50_BATCH} img/GPU; teacher forward "
                              f"= {FORWARD_FRACTION:.2f} step",
            "P": float(r.model_params_bytes), "S": float(r.model_state_bytes), "batch_per_rank": RESNET50_BATCH,
            "C": {"allreduce": step, "codistill": step * (1 + FORWARD_FRACTION), "model_average": step,
                  "ensemble_compress": step * (1 + 2 * FORWARD_FRACTION)},
            "periods": {"codistill": [50, 2500], "model_average": [16], "ensemble_compress": [4000]}}


# --------------------------------------------------------------------------- table and plot

def variants(s: dict):
    """(algorithm, period, label) of a scenario, baselines first."""
    yield "allreduce_flat", 1, "all-reduce (flat ring)"
    yield "allreduce_hier", 1, "all-reduce (hierarchical)"
    names = {"codistill": "codistill k={}", "model_average": "MA-DNN tau={}", "ensemble_compress": "EC-DNN tau={}"}
    for a, periods in s["periods"].items():
        for per in periods:
            yield a, per, names[a].format(per)


def rows_for(s: dict, p: int, gbps: float, net0: dict, shared: bool) -> list[dict]:
    net = {**net0, "beta_s": gbps * 1e9 / 8, "shared": shared}
    base = {}
    out = []
    for algo, per, label in variants(s):
        C = s["C"]["allreduce" if algo.startswith("allreduce") else algo]
        r = project(algo, per, p, s["P"], s["S"], C, net)
        if algo.startswith("allreduce"):
            base[algo] = r
        out.append({"scenario": s["scenario"], "algorithm": label, "period": per, "workers": p, "groups": 2,
                    "ranks_per_group": p // 2, "slow_link": "shared" if shared else "per-worker",
                    "slow_Gbps": gbps, "fast_GBps": net["beta_f"] / 1e9,
                    "alpha_slow_us": net["alpha_s"] * 1e6, "alpha_fast_us": net["alpha_f"] * 1e6,
                    "compute_s": C, "P_bytes": s["P"], "S_bytes": s["S"], **r})
    for row in out:
        for b, key in (("allreduce_flat", "flat"), ("allreduce_hier", "hier")):
            row[f"speedup_vs_{key}_serial"] = base[b]["step_serial_s"] / row["step_serial_s"]
            row[f"speedup_vs_{key}_overlap"] = base[b]["step_overlap_s"] / row["step_overlap_s"]
    return out


PANELS = (("per-worker", "flat", False), ("per-worker", "hier", False), ("shared", "hier", True))


def plot(scenarios: list[dict], net0: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sweep = np.logspace(-1, 3, 81)
    fig, axes = plt.subplots(len(scenarios), len(PANELS), figsize=(6.2 * len(PANELS), 4.6 * len(scenarios)),
                             squeeze=False)
    styles = {8: ":", 64: "--", 256: "-"}
    for i, s in enumerate(scenarios):
        labels = [label for algo, _, label in variants(s) if not algo.startswith("allreduce")]
        colors = {label: f"C{k}" for k, label in enumerate(labels)}
        for j, (link, key, shared) in enumerate(PANELS):
            ax = axes[i][j]
            for p in PLOT_P:
                curves: dict[str, list[float]] = {}
                for g in sweep:
                    for row in rows_for(s, p, g, net0, shared):
                        if row["algorithm"] in colors:
                            curves.setdefault(row["algorithm"], []).append(row[f"speedup_vs_{key}_serial"])
                for label, ys in curves.items():
                    ax.plot(sweep, ys, styles[p], color=colors[label], label=f"{label}, p={p}")
            ax.axhline(1.0, color="0.5", lw=0.8)
            for g in TABLE_GBPS:
                ax.axvline(g, color="0.85", lw=0.8, zorder=0)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("between-group bandwidth (Gb/s)" + (" per worker" if not shared else ", one shared link"))
            ax.set_ylabel("speedup per update over all-reduce")
            base = "flat ring all-reduce" if key == "flat" else "hierarchical all-reduce"
            ax.set_title(f"{s['scenario']}\nover {base}; slow links: {link}", fontsize=9)
            ax.grid(True, which="both", alpha=0.2)
            if j == 0:
                ax.legend(fontsize=6.5, ncol=2)
    fig.suptitle(f"alpha-beta model, 2 groups of p/2 workers; fast tier {net0['beta_f'] / 1e9:.0f} GB/s, "
                 f"{net0['alpha_f'] * 1e6:.0f} us; slow tier {net0['alpha_s'] * 1e6:.0f} us per message; "
                 f"no overlap of communication and compute", fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    tmp.replace(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast-GBps", type=float, default=100.0, help="fast tier bandwidth per worker, GB/s")
    p.add_argument("--alpha-fast-us", type=float, default=5.0)
    p.add_argument("--alpha-slow-us", type=float, default=50.0)
    p.add_argument("--bench", default="results/bench", help="where comm_volume.csv and time_to_target_runs.csv are")
    p.add_argument("--out", default="results/bench")
    args = p.parse_args()
    bench = Path(args.bench)
    net0 = {"alpha_f": args.alpha_fast_us * 1e-6, "beta_f": args.fast_GBps * 1e9, "alpha_s": args.alpha_slow_us * 1e-6}
    for need in ("comm_volume.csv", "time_to_target_runs.csv"):
        if not (bench / need).exists():
            raise SystemExit(f"{bench / need} is missing: run benchmarks/{need.split('.')[0].replace('_runs', '')}.py first")
    emb, checks = embedded_scenarios(pd.read_csv(bench / "time_to_target_runs.csv", dtype={"model": str}))
    chk = pd.DataFrame(checks)
    print(chk.to_markdown(index=False))
    if len(chk) and not chk.equal.all():
        raise SystemExit("measured bytes disagree with the closed form of the model")
    scenarios = emb + [resnet50_scenario(pd.read_csv(bench / "comm_volume.csv"))]
    rows = [r for s in scenarios for shared in (False, True) for w in WORKERS for g in TABLE_GBPS
            for r in rows_for(s, w, g, net0, shared)]
    df = pd.DataFrame(rows)
    df.insert(1, "compute_source", df.scenario.map({s["scenario"]: s["compute_source"] for s in scenarios}))
    benchlib.write_csv(df, args.out, "projected_walltime.csv")
    plotted = [s for s in scenarios if s["scenario"].startswith(("cifar", "ResNet-50"))] or scenarios[:2]
    plot(plotted, net0, Path(args.out) / "projected_walltime.png")
    show = df[(df.workers.isin([8, 256])) & (df.slow_Gbps == 10.0)][
        ["scenario", "slow_link", "algorithm", "workers", "compute_s", "bytes_total", "bytes_between",
         "step_serial_s", "speedup_vs_flat_serial", "speedup_vs_hier_serial", "speedup_vs_hier_overlap"]]
    print(show.to_markdown(index=False, floatfmt=".4g"))


if __name__ == "__main__":
    main()
