"""What each claim's regime would cost, for the claims without an in-regime verdict: hours on this
machine's 2 cores and on one H200, from measured rates only:

    python benchmarks/regime_cost.py [--out results/bench] [--replications replications]

Each such claim declares `regime_cost:` in replications/<paper>/experiments.yaml (analysis/schema.py
RegimeCost): what its regime needs, in words with the measured number that puts it there, and the
runs, priced here:
- `embedded` runs: updates x ranks x runs at this CPU's quiet s/update for the workload, batch and
  precision (results/bench/efficiency.csv, rows timed below benchlib.QUIET_LOAD; a batch it has not
  timed is an error naming the command that times it; rows of two CPUs are an error too: a median
  over two machines is neither's rate); runs on the reuse allocator (`allocator:
  reuse`, the LM only) at results/bench/lm_levers.csv's quiet fused-LSTM rows of the same CPU.
  Compute only: start-up and evaluation add about a third (results/bench/replication_walltime.csv: training is 74% of the default tier's
  core-seconds). On one GPU: updates x ranks x runs x the H200's measured s/update of the workload's
  embedded preset (results/bench/codist_check_cuda.csv, at its batch): a lower bound for runs at that
  batch or larger (a larger batch takes no less time an update), an upper bound for smaller ones.
- `full` figures: the `--config scale=full` plan's runs of the figure, `times` over, on one H200 at
  its measured rates (codist.budget's GPU-hours: the sum over runs, so one GPU's time) and on 2 CPU
  cores at least their training FLOPs (gpu_throughput.csv's train_gflops_per_sample) at this CPU's
  measured fp32 GEMM peak (efficiency.csv), a lower bound a real run stays far above.
Writes results/bench/regime_cost.csv: one row per claim, `cpu_h_2cores` and `gpu_h_one` with their
bound ("=" a projection at measured rates, ">=" a lower bound) and the basis of each, and
`cpu_loadavg`: the highest 1-min load average beside the efficiency.csv timings the CPU hours rest on.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

from analysis.schema import SpecError, parse
from benchmarks.benchlib import quiet

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "results" / "bench"
PAPERS = ("anil2018", "sodhani2020", "sun2016")
CORES = 2
GPU = "h200"
COLUMNS = ["paper", "claim", "needs", "bound", "cpu_h_2cores", "cpu_bound", "gpu_h_one", "gpu_bound", "gpu",
           "cpu_basis", "gpu_basis", "cpu_loadavg"]


class CostError(ValueError):
    """A rate the pricing needs is not measured; the message names the file, the key and the command."""


def _quiet(efficiency: pd.DataFrame, precision: str) -> pd.DataFrame:
    return efficiency[(efficiency.precision == precision) & efficiency.loadavg.map(quiet)]


def cpu_rates(efficiency: pd.DataFrame, precision: str = "fp32") -> dict[tuple[str, int], float]:
    """(workload, batch) -> median quiet s/update through codist's loop in `precision`."""
    ok = _quiet(efficiency, precision)
    return {(w, int(b)): float(g.codist_s_per_update.median()) for (w, b), g in ok.groupby(["workload", "batch"])}


def cpu_loads(efficiency: pd.DataFrame, precision: str = "fp32") -> dict[tuple[str, int], float]:
    """(workload, batch) -> the highest load average beside the rows cpu_rates takes its rate from."""
    ok = _quiet(efficiency, precision)
    return {(w, int(b)): float(g.loadavg.max()) for (w, b), g in ok.groupby(["workload", "batch"])}


def gpu_rates(check: pd.DataFrame) -> dict[str, tuple[int, float]]:
    """workload -> (batch, s/update) of its embedded preset's uninterrupted CUDA run (the final row)."""
    out = {}
    for r in check[check.device == "cuda"].itertuples():
        # the column holds the final row's JSON cut short: its leading step, samples and wall_s are whole
        got = {k: float(v) for k, v in re.findall(r'"(step|samples|wall_s)": ([\d.]+)', r.final_metric)}
        if {"step", "samples", "wall_s"} <= got.keys():
            out[r.workload] = (round(got["samples"] / got["step"]), got["wall_s"] / got["step"])
    return out


def price_embedded(runs, cpu: dict, gpu: dict) -> tuple[float, float | None, str, str, str]:
    """(CPU hours on 2 cores, GPU hours or None, the GPU bound, the bases). `cpu`: (workload, batch) ->
    s/update in fp32, and (workload, batch, "bf16") -> in bf16 (rate_tables). The H200's rate was measured
    at one batch a workload: a run at that batch or above costs at least it an update (">="), one
    below at most ("<="); runs on both sides of it, or a workload it never ran, give no GPU figure."""
    cpu_s, gpu_s, cpu_basis, gpu_basis, sides = 0.0, 0.0, [], [], set()
    for r in runs:
        rate = cpu.get(_key(r))
        if rate is None and r.allocator == "reuse":
            raise CostError(f"results/bench/lm_levers.csv: no quiet fused-{r.precision}-reuse row for workload "
                            f"{r.workload!r} batch {r.batch} on efficiency.csv's CPU (time it: .venv/bin/python "
                            f"benchmarks/lm_levers.py --batches {r.batch} --variants fused-{r.precision}-reuse)")
        if rate is None:
            raise CostError(f"results/bench/efficiency.csv: no quiet {r.precision} row for workload {r.workload!r} "
                            f"batch {r.batch} (time it: .venv/bin/python benchmarks/efficiency.py --only {r.workload} "
                            f"--batches {r.batch})")
        n = r.updates * r.ranks * r.runs
        cpu_s += n * rate
        how = ([] if r.precision == "fp32" else [r.precision]) + (["reuse allocator"] if r.allocator == "reuse" else [])
        cpu_basis.append(f"{r.runs} x {r.ranks} rank(s) x {r.updates:,} updates of {r.workload} batch {r.batch} "
                         f"at {rate:.4g} s" + (f" ({', '.join(how)})" if how else ""))
        g = gpu.get(r.workload)
        if g is None:
            sides.add(None)
            continue
        side = ">=" if r.batch >= g[0] else "<="
        sides.add(side)
        gpu_s += n * g[1]
        gpu_basis.append(f"{r.workload} at {side} {g[1] * 1e3:.3g} ms an update (H200, its embedded preset's batch {g[0]})")
    bound = next(iter(sides)) if len(sides) == 1 and None not in sides else None
    return (cpu_s / CORES / 3600, None if bound is None else gpu_s / 3600, bound or "",
            "; ".join(cpu_basis), "; ".join(gpu_basis))


def _key(r) -> tuple:
    """CostRuns -> its key in the rate tables: (workload, batch), with the precision where not fp32; on the
    reuse allocator (workload, batch, precision, "reuse")."""
    if r.allocator == "reuse":
        return (r.workload, r.batch, r.precision, "reuse")
    return (r.workload, r.batch) if r.precision == "fp32" else (r.workload, r.batch, r.precision)


def reuse_rates(levers: pd.DataFrame, cpu: str) -> tuple[dict, dict]:
    """(rates, loads) keyed ("lm", batch, precision, "reuse"): the median quiet s/update of lm_levers.csv's
    fused LSTM, uncompiled, on the reuse allocator, measured on `cpu` (the CPU of efficiency.csv's rows,
    so every rate of a claim is one machine's), and the highest load beside those rows."""
    ok = levers[(levers.allocator == "reuse") & (levers.lstm == "fused") & ~levers["compile"].astype(bool)
                & (levers.cpu == cpu) & levers.loadavg.map(quiet)]
    groups = ok.groupby(["batch", "precision"])
    return ({("lm", int(b), p, "reuse"): float(g.s_per_update.median()) for (b, p), g in groups},
            {("lm", int(b), p, "reuse"): float(g.loadavg.max()) for (b, p), g in groups})


def rate_tables(efficiency: pd.DataFrame, levers: pd.DataFrame | None = None) -> tuple[dict, dict]:
    """(rates, loads) over both precisions, keyed as _key: fp32 by (workload, batch); with `levers`
    (lm_levers.csv), the LM's reuse-allocator rows on efficiency.csv's CPU too."""
    cpus = sorted(efficiency.cpu.dropna().unique()) if "cpu" in efficiency else []
    if len(cpus) > 1:   # a median over two machines' rows is neither machine's rate
        raise CostError(f"results/bench/efficiency.csv: rows of {len(cpus)} CPUs ({'; '.join(cpus)}); a claim's rates "
                        f"must be one machine's (time every row on one: benchmarks/efficiency.py replaces only the rows it measures)")
    rates, loads = cpu_rates(efficiency), cpu_loads(efficiency)
    rates.update({(*k, "bf16"): v for k, v in cpu_rates(efficiency, "bf16").items()})
    loads.update({(*k, "bf16"): v for k, v in cpu_loads(efficiency, "bf16").items()})
    if levers is not None and len(efficiency):
        r, lo = reuse_rates(levers, cpus[0])
        rates.update(r)
        loads.update(lo)
    return rates, loads


def price_full(figures, plan, table, gflops: dict, cpu_peak_gflops: float) -> tuple[float, float, str, str]:
    """(CPU hours on 2 cores, lower bound; GPU hours on one H200; the bases)."""
    from codist import budget
    gpu_h, flops, basis = 0.0, 0.0, []
    for f in figures:
        paper, fig = f.figure.split("/")
        spec = plan.figures.get((paper, fig))
        if spec is None:
            raise CostError(f"regime_cost.full: {f.figure!r} is not a figure of the full-scale plan")
        ids = list(dict.fromkeys(r.run_id for r in spec.runs))
        for rid in ids:
            cfg = plan.config(rid)
            priced = budget.run_hours(cfg, table, GPU, "fp32")
            if priced is None:
                raise CostError(f"results/bench/gpu_throughput.csv: no {GPU} rate for {budget.model_key(cfg)} "
                                f"({f.figure}; make gpu-check on an {GPU})")
            ws = cfg.parallel.world_size
            gpu_h += f.times * priced[0] * ws
            per_sample = gflops.get(budget.model_key(cfg))
            if per_sample is None:
                raise CostError(f"results/bench/gpu_throughput.csv: no train_gflops_per_sample for "
                                f"{budget.model_key(cfg)} ({f.figure})")
            flops += (f.times * cfg.train.steps * (1 + budget.FORWARD_SHARE * budget.extra_forwards(cfg))
                      * cfg.train.batch_per_rank * ws * per_sample)
        basis.append(f"{f.figure} ({len(ids)} runs{'' if f.times == 1 else f', x {f.times:g}'})")
    cpu_h = flops / (CORES * cpu_peak_gflops) / 3600
    return (cpu_h, gpu_h, f"{', '.join(basis)}: {flops:.3g} GFLOP at {CORES} x {cpu_peak_gflops:.0f} GFLOP/s "
            f"(this CPU's measured fp32 GEMM peak a core)", f"{', '.join(basis)} at the H200's measured rates "
            f"(codist.budget --gpu {GPU}; TF32 products)")


def rows(replications: Path = ROOT / "replications", bench: Path = BENCH) -> list[dict]:
    efficiency = pd.read_csv(bench / "efficiency.csv")
    levers = pd.read_csv(bench / "lm_levers.csv") if (bench / "lm_levers.csv").exists() else None
    (cpu, loads), gpu = rate_tables(efficiency, levers), gpu_rates(pd.read_csv(bench / "codist_check_cuda.csv"))
    calm = efficiency[efficiency.loadavg.map(quiet)]
    peak_row = calm.loc[calm.gemm_fp32_gflops.idxmax()]
    peak, peak_load = float(peak_row.gemm_fp32_gflops), float(peak_row.loadavg)
    thr = pd.read_csv(bench / "gpu_throughput.csv")
    gflops = {m: float(g.train_gflops_per_sample.iloc[0]) for m, g in thr[thr.gpu == GPU].groupby("model")}
    plan = table = None
    out = []
    for paper in PAPERS:
        path = replications / paper / "experiments.yaml"
        spec = _paper_spec(path)
        for c in spec.claims:
            cost = c.regime_cost
            if cost is None:
                continue
            cpu_h = gpu_h = 0.0
            cpu_basis, gpu_basis, cpu_bound, gpu_bound = [], [], "=", ">="
            load = max([loads[_key(r)] for r in cost.embedded if _key(r) in loads]
                       + ([peak_load] if cost.full else []), default=None)
            if cost.embedded:
                h, g, gpu_bound, cb, gb = price_embedded(cost.embedded, cpu, gpu)
                cpu_h += h
                gpu_h = None if g is None else gpu_h + g
                cpu_basis.append(cb)
                gpu_basis.append(gb if g is not None else "no one-sided bound from the H200's measured rates")
            if cost.full:
                if plan is None:
                    plan, table = _full_plan(replications, bench)
                h, g, cb, gb = price_full(cost.full, plan, table, gflops, peak)
                cpu_h += h
                cpu_bound = ">="
                gpu_h = None if gpu_h is None or (cost.embedded and gpu_bound != ">=") else gpu_h + g
                gpu_bound = ">=" if cost.embedded else "="
                cpu_basis.append(cb)
                gpu_basis.append(gb)
            if cost.bound == "lower":   # the runs themselves are a lower bound of the regime's
                cpu_bound = ">="
                gpu_bound = ">=" if gpu_bound == ">=" else ""
                gpu_h = gpu_h if gpu_bound else None
            out.append({"paper": paper, "claim": c.id, "needs": " ".join(cost.needs.split()), "bound": cost.bound,
                        "cpu_h_2cores": round(cpu_h, 3), "cpu_bound": cpu_bound,
                        "gpu_h_one": None if gpu_h is None else round(gpu_h, 3), "gpu_bound": gpu_bound, "gpu": GPU,
                        "cpu_basis": "; ".join(cpu_basis), "gpu_basis": "; ".join(gpu_basis), "cpu_loadavg": load})
    return out


def _paper_spec(path: Path):
    """A paper's experiments.yaml, parsed; unreadable or malformed: a CostError of one line naming it."""
    try:
        return parse(yaml.safe_load(path.read_text()), path)
    except (OSError, yaml.YAMLError) as e:
        raise CostError(f"{path}: not a readable YAML file ({' '.join(str(e).split())})") from None
    except SpecError as e:   # one line per key: joined, each already names the file
        raise CostError("; ".join(str(e).splitlines())) from None


def _full_plan(replications: Path, bench: Path):
    from workflows.budget import priced_plan
    plan, table, _ = priced_plan(replications, replications / "throughput.yaml", bench / "gpu_throughput.csv")
    return plan, table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=BENCH)
    p.add_argument("--replications", type=Path, default=ROOT / "replications",
                   help="the papers' experiments.yaml (their regime_cost blocks)")
    args = p.parse_args(argv)
    try:
        table = pd.DataFrame(rows(args.replications), columns=COLUMNS)
    except CostError as e:
        print(f"regime_cost: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / "regime_cost.csv.tmp"
    table.to_csv(tmp, index=False)
    tmp.replace(args.out / "regime_cost.csv")
    print(table[["paper", "claim", "cpu_bound", "cpu_h_2cores", "gpu_bound", "gpu_h_one"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
