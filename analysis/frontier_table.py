"""A workload's frontier runs -> one row per run (.csv), one row per point (_points.csv) and the
Markdown table (.md): final quality of the method's result model, between-group bytes per rank
per update, the Pareto front over the points' means, projected wall time per bandwidth.

    python analysis/frontier_table.py --runs W_runs.json --csv W.csv --points W_points.csv --markdown W.md

Every number comes from the runs' summary.json (written by the workflow's `<workload>_runs.json`,
workflows/frontier_plan.py). Intervals: mean -/+ t(0.95, n-1) sd / sqrt(n) over seeds (the claims'
one-sided 95% bounds, a two-sided 90% interval; analysis/stats.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from analysis import stats  # noqa: E402
from analysis.frontier_pareto import pareto_front  # noqa: E402
from analysis.frontier_walltime import step_seconds  # noqa: E402

from codist.runlog import atomic_write_text  # noqa: E402


def gbps_column(g: float) -> str:
    return f"projected_run_s_{g:g}Gbps"


def between_group_bytes(summary: dict) -> float:
    """Training bytes a rank sends per update across the two groups, one rank per group: all of
    them (a one-model method's all-reduce spans both groups; a multi-model method's only traffic
    is its exchange, which the meter also counts as between-group, checked here)."""
    comm = summary["comm"]
    if summary["world_size"] != 2:
        raise ValueError(f"run {summary['run_id']}: world_size {summary['world_size']}; the frontier's layout is "
                         f"2 ranks, one per group")
    total = comm["training_sent_bytes_per_rank_per_update"]
    locals_ = [m for m in summary["models"] if m.isdigit()]
    if len(locals_) > 1 and comm["between_group_sent_bytes_per_rank_per_update"] != total:
        raise ValueError(f"run {summary['run_id']}: {len(locals_)} models on 2 ranks, but the meter counts "
                         f"{comm['between_group_sent_bytes_per_rank_per_update']} of {total} bytes per update "
                         f"between groups")
    return total


def run_rows(manifest: dict) -> pd.DataFrame:
    rows = []
    for e in manifest["runs"]:
        s = json.loads((Path(e["run_dir"]) / "summary.json").read_text())
        if s["run_id"] != e["run_id"]:
            raise ValueError(f"{e['run_dir']}/summary.json is run {s['run_id']}, expected {e['run_id']}")
        if e["model"] not in s["models"]:
            raise ValueError(f"run {e['run_id']} ({e['label']}) has no model {e['model']!r} "
                             f"(has {', '.join(s['models'])})")
        between = between_group_bytes(s)
        compute = s["wall_s"] / s["steps"]
        row = {"workload": manifest["workload"], "label": e["label"], "algorithm": e["algorithm"],
               "knob": e["knob"], "period": e["period"], "seed": e["seed"], "run_id": e["run_id"],
               "model": e["model"], "metric": s["metric"], "higher_is_better": s["higher_is_better"],
               "final_quality": s["models"][e["model"]]["final"][s["metric"]], "steps": s["steps"],
               "between_group_bytes_per_update": between, "wall_s": s["wall_s"], "compute_s_per_update": compute,
               "shared_with": e.get("shared_with", "")}
        for g in manifest["bandwidths_gbps"]:
            row[gbps_column(g)] = s["steps"] * step_seconds(e["algorithm"], e["period"], between, compute, g)
        rows.append(row)
    return pd.DataFrame(rows)


def point_rows(runs: pd.DataFrame, bandwidths: list[float]) -> pd.DataFrame:
    """One row per point: quality mean and interval over seeds, bytes, front, projected times."""
    out = []
    for label, g in runs.groupby("label", sort=False):
        iv = stats.t_interval(g["final_quality"])
        out.append({"label": label, "algorithm": g["algorithm"].iloc[0], "knob": g["knob"].iloc[0],
                    "period": g["period"].iloc[0], "model": g["model"].iloc[0], "metric": g["metric"].iloc[0],
                    "seeds": iv.n, "quality_mean": iv.mean, "quality_sd": iv.sd, "quality_low": iv.low,
                    "quality_high": iv.high, "between_group_bytes_per_update": g["between_group_bytes_per_update"].mean(),
                    "wall_s": g["wall_s"].mean(),
                    **{gbps_column(b): g[gbps_column(b)].mean() for b in bandwidths}})
    pts = pd.DataFrame(out)
    higher = bool(runs["higher_is_better"].iloc[0])
    pts["pareto"] = pareto_front(list(zip(pts.between_group_bytes_per_update, pts.quality_mean)), higher)
    ar = pts.loc[pts.algorithm == "allreduce", "between_group_bytes_per_update"]
    pts["bytes_vs_allreduce"] = pts.between_group_bytes_per_update / ar.iloc[0] if len(ar) else float("nan")
    return pts.sort_values("between_group_bytes_per_update", ascending=False, kind="stable").reset_index(drop=True)


def markdown(manifest: dict, runs: pd.DataFrame, pts: pd.DataFrame) -> str:
    metric = pts.metric.iloc[0]
    better = "higher" if bool(runs.higher_is_better.iloc[0]) else "lower"
    bw = manifest["bandwidths_gbps"]
    show = pd.DataFrame({
        "point": pts.label + pts.pareto.map({True: " *", False: ""}),
        "model": pts.model,
        f"{metric} (mean)": pts.quality_mean,
        "90% interval": [f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(pts.quality_low, pts.quality_high)],
        "seeds": pts.seeds,
        "bytes/update": pts.between_group_bytes_per_update,
        "x all-reduce": pts.bytes_vs_allreduce,
        **{f"run s @{b:g} Gb/s": pts[gbps_column(b)] for b in bw},
        "measured s": pts.wall_s,
    })
    shared = sorted({s.split(": ", 1)[-1].rsplit(", seed", 1)[0] for s in runs.shared_with if s})
    lines = [
        f"## {manifest['workload']}: {manifest['title']}", "",
        f"Regime: {manifest['regime']} (embedded). Quality: final `{metric}` of the result model ({better} is "
        f"better), mean and 90% t interval over seeds. Bytes: training bytes a rank sends between the two "
        f"groups per update (2 ranks, one per group). `*`: on the Pareto front of the means (no other point has "
        f"fewer or equal bytes and better or equal quality). Projected: the run's {int(runs.steps.iloc[0]):,} "
        f"updates at its measured compute time per update plus benchmarks/projected_walltime.py's alpha-beta "
        f"cost of its bytes at that bandwidth between the groups (50 us per message); measured: training wall "
        f"time here (2 ranks sharing memory on a shared 2-core machine).", "",
        show.to_markdown(index=False, floatfmt=".4g"), "",
    ]
    if shared:
        lines += ["Runs shared with the papers' experiments (trained once): " + "; ".join(shared) + ".", ""]
    if manifest.get("left_out"):
        lines += ["Left out: " + "; ".join(manifest["left_out"]) + ".", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="<workload>_runs.json written by the workflow")
    p.add_argument("--csv", required=True, help="one row per run")
    p.add_argument("--points", required=True, help="one row per point (method and period)")
    p.add_argument("--markdown", required=True)
    a = p.parse_args(argv)
    manifest = json.loads(Path(a.runs).read_text())
    runs = run_rows(manifest)
    pts = point_rows(runs, manifest["bandwidths_gbps"])
    atomic_write_text(a.csv, runs.to_csv(index=False))
    atomic_write_text(a.points, pts.to_csv(index=False))
    atomic_write_text(a.markdown, markdown(manifest, runs, pts))
    print(pts[["label", "quality_mean", "between_group_bytes_per_update", "pareto"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
