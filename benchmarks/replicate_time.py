"""Measured wall time of `make replicate` per figure (a tier's cost), from the logs of calls that ran:

    python benchmarks/replicate_time.py --log DRIVER.log [--log ...] --results ROOT --commit SHA
        [--load LOAD.log] [--tier paper] [--cores 2] [--note TEXT] [--out results/bench]

Each DRIVER.log is what a wrapper wrote around `make replicate TIER=... TARGETS=...` calls: per call a
line '== start NAME <iso time> <epoch s> [load=L] [commit=SHA]', make's echoed snakemake command (its
targets: figures, or runs/<id>/summary.json), and '== end NAME <iso time> <epoch s> rc=N'; a resumed
timing appends its call to the same log. The calls of one NAME make one row (a figure made in several
calls: a stopped call and its resumption, lanes of run ids side by side, the final pass that draws it):
wall time is the time inside at least one call (lanes side by side count once; the gap between a
stopped call and its resumption, perhaps on another machine, not at all), with how many calls and how
many of them ran at once. A call with a start and no end was cut off (its machine lost): it times
nothing. The runs are the named figures' runs
(ROOT/embedded/<paper>/<figure>_runs.json) with a summary.json under ROOT; their own elapsed_s are
summed beside the wall time (oversubscribed ranks on a shared machine: the sum is what the runs
took one after another, the rest is Snakemake, the analysis and, with lanes, their overlap). Runs
restored from the run ledger (make replicate LEDGER=keep) are the row's own when they trained wholly
inside one of its calls (an earlier call of the same timing, on a machine since lost: the ledger kept
them); any other restored run was trained elsewhere: counted apart (`restored`), in neither sum, and a
row with any does not size a tier (it timed only part of it).
LOAD.log holds '<epoch s> <1-min load average> [<foreign>]' samples (a sampler every 30 s): each row
notes the load over its call, because the 2-core machine is shared and a timing under load is slower.
benchmarks/time_tier.py writes the third column, the mean number of runnable threads that were not the
timing's: the tier's own ranks load the machine to 2 and more, so for its calls the load average
cannot tell a quiet timing from a shared one, and the foreign count decides instead.

Rows are keyed by (figures, tier, commit): a rerun of the same call replaces its row. A row sizes a
tier (`budget_figure`, read by budget_rows) only when it was timed on a quiet machine: with foreign
samples, when at most FOREIGN_MAX threads of others ran beside it on average; without them (an older
log), when its highest sampled load stayed below benchlib.QUIET_LOAD. A timing taken under load, or
with no load sampled, decides nothing. With --total NAME, a last row sums the calls of one timing
(the tier end to end: the time inside its calls, each run counted once); it sizes the tier only
when every call does and each stretch of it (the first call, and each resumption) began at a load of
at most START_LOAD (`load_at_start` is the highest of those loads).
Writes results/bench/replicate_time.csv.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path

import pandas as pd

from benchmarks.benchlib import quiet
from workflows.run_ledger import RESTORED

# The rule for a tier timing: the machine's 1-min load at most 1.5 when the timing starts,
# and (ours) under a tenth of a core of other work beside it on average: a check of the load alone
# would refuse every tier timing, since the tier's own ranks keep the 2 cores busy.
START_LOAD, FOREIGN_MAX = 1.5, 0.1
SAMPLE_PERIOD_S = 30   # the load sampler's period (benchmarks/time_tier.py writes a line this often)

OUT_NAME = "replicate_time.csv"
KEY = ["figures", "tier", "commit"]
_MARK = re.compile(r"^== (start|end) (\S+) (\S+) (\d+)(?: rc=(-?\d+))?(?: load=([\d.]+))?(?: commit=(\w+))?")
_TARGET = re.compile(r"results/embedded/(\w+)/(\w+?)(?:_paper)?\.(?:png|md|csv)\b")


def parse_log(path: Path) -> list[dict]:
    """The log's calls, oldest first (a resumed timing appends a call to its group's log): each with
    its NAME, start and end (epoch s), rc, start load, the commit it ran (None in older logs) and the
    (paper, figure) pairs its targets name. A call with a start and no end was cut off (its machine
    lost): its end is None, and it times nothing."""
    calls: list[dict] = []
    for line in path.read_text().splitlines():
        m = _MARK.match(line)
        if m and m.group(1) == "start":
            calls.append({"name": m.group(2), "start": int(m.group(4)), "end": None, "started_utc": m.group(3),
                          "rc": None, "figures": [], "command": None,
                          "start_load": float(m.group(6)) if m.group(6) is not None else None,
                          "commit": m.group(7)})
        elif m:
            if not calls or calls[-1]["end"] is not None:
                raise SystemExit(f"{path}: an '== end' line with no '== start' before it: {line!r}")
            calls[-1].update(end=int(m.group(4)), rc=int(m.group(5)) if m.group(5) is not None else None)
        elif "snakemake " in line and calls and calls[-1]["command"] is None:   # make's echo of its snakemake command
            calls[-1]["command"] = line
            calls[-1]["figures"] = list(dict.fromkeys(_TARGET.findall(line)))
    if not any(c["end"] is not None for c in calls):
        raise SystemExit(f"{path}: no '== start' and '== end' lines (a call that did not finish)")
    return calls


def _started(folder: Path) -> float | None:
    """When the run in `folder` started (its manifest), or None where that cannot be read."""
    try:
        return float(json.loads((folder / "manifest.json").read_text())["started_unix"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def runs_of(root: Path, figures: list[tuple[str, str]], calls: list[dict] = ()) -> tuple[dict[str, float], set[str]]:
    """(run id -> elapsed_s of every finished run of the figures that these calls trained, the ids of
    those restored from the run ledger that they did not); shared runs counted once. A restored run
    is these calls' own when it trained wholly inside one of them (its manifest's start and its
    elapsed time): an earlier call of the same timing, on a machine since lost, whose runs the ledger kept."""
    out, restored = {}, set()
    for paper, figure in figures:
        manifest = root / "embedded" / paper / f"{figure}_runs.json"
        if not manifest.exists():
            continue
        for r in json.loads(manifest.read_text())["runs"]:
            folder = root / "embedded" / "runs" / r["run_id"]
            if not (folder / "summary.json").exists():
                continue
            elapsed = float(json.loads((folder / "summary.json").read_text())["elapsed_s"])
            if (folder / RESTORED).exists():   # trained by another call, on another machine
                began = _started(folder)
                if began is None or not any(c["start"] <= began and began + elapsed <= c["end"] for c in calls):
                    restored.add(r["run_id"])   # not by one of these calls: not this timing's
                    continue
            out[r["run_id"]] = elapsed
    return out, restored


def _samples(path: Path, start: int, end: int) -> list[list[str]]:
    every = [line.split() for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in every if start <= int(r[0]) <= end]
    if not rows:   # a call shorter than the sampling period: the first sample after it covers it
        rows = [r for r in every if end < int(r[0]) <= end + SAMPLE_PERIOD_S][:1]
    return rows


def load_within(path: Path | None, spans: list[tuple[int, int]]) -> tuple[float | None, float | None, float | None]:
    """Mean and max of the load samples taken within the intervals `spans` (the calls of one row:
    lanes, a stopped call and its resumption), each sample counted once, and the mean foreign count
    (None where the samples have no third column)."""
    if path is None:
        return None, None, None
    picked = {int(r[0]): r for a, b in spans for r in _samples(path, a, b)}
    rows = [picked[t] for t in sorted(picked)]
    if not rows:
        return None, None, None
    vals = [float(r[1]) for r in rows]
    foreign = [float(r[2]) for r in rows if len(r) > 2]
    return (round(sum(vals) / len(vals), 1), max(vals),
            round(sum(foreign) / len(foreign), 3) if len(foreign) == len(rows) else None)


def _merged(calls: list[dict], gap: int) -> list[tuple[dict, int, int]]:
    """(first call, start, end) of each run of calls that follow one another within `gap` s of every
    earlier call's end (lanes side by side overlap: one run)."""
    out: list[tuple[dict, int, int]] = []
    for c in sorted(calls, key=lambda c: c["start"]):
        if out and c["start"] - out[-1][2] <= gap:
            out[-1] = (out[-1][0], out[-1][1], max(out[-1][2], c["end"]))
        else:
            out.append((c, c["start"], c["end"]))
    return out


def _busy_s(calls: list[dict]) -> int:
    """Seconds inside at least one call: lanes side by side count once, and the gap between a stopped
    call and its resumption (another session, another machine) not at all."""
    return sum(end - start for _, start, end in _merged(calls, 0))


def _stretch_starts(calls: list[dict]) -> list[dict]:
    """The calls that began a stretch of the timing: the first, and each that began more than a load
    sampling period after every earlier call had ended (a resumption, later, perhaps elsewhere)."""
    return [first for first, _, _ in _merged(calls, SAMPLE_PERIOD_S)]


def _calls_row(every: list[dict], figures: list[tuple[str, str]], label: str, root: Path, load: Path | None,
               tier: str, cores: int, commit: str, extra: str) -> dict:
    calls = [c for c in every if c["end"] is not None]
    cut = len(every) - len(calls)
    start = min(c["start"] for c in calls)
    at_once = max(sum(c["start"] <= t < c["end"] for c in calls) for t in (c["start"] for c in calls))
    runs, restored = runs_of(root, figures, calls)
    mean, peak, foreign = load_within(load, [(c["start"], c["end"]) for c in calls])
    stretches = _stretch_starts(calls)
    first = stretches[0]
    start_loads = [c["start_load"] for c in stretches]
    commits = list(dict.fromkeys(c["commit"] for c in calls if c.get("commit")))
    note = (f"{cores}-core machine; {len(calls)} call(s), up to {at_once} at once"
            + (f", in {len(stretches)} stretches (a stopped timing resumed; the gaps between them not counted)"
               if len(stretches) > 1 else "") + "; "
            + (f"1-min load mean {mean} (max {peak}) over the calls" if mean is not None else "load not sampled")
            + (f", {foreign} runnable threads of others beside them on average" if foreign is not None else "")
            + (f", load {'/'.join(str(x) for x in start_loads)} at the start" + ("s" if len(stretches) > 1 else "")
               if all(x is not None for x in start_loads) else "")
            + (f"; calls at commits {', '.join(x[:12] for x in commits)}" if len(commits) > 1 else "")
            + (f"; {len(restored)} run(s) restored from the run ledger, not trained by these calls (not in wall_s "
               f"or runs_elapsed_s)" if restored else "")
            + (f"; {cut} call(s) cut off with no end line (their machine lost): not timed, and their runs count as "
               f"restored" if cut else "")
            + (f"; {extra}" if extra else ""))
    return {"figures": label, "tier": tier, "runs": len(runs), "restored": len(restored),
            "wall_s": _busy_s(calls), "runs_elapsed_s": round(sum(runs.values()), 1), "cores": cores,
            "load_mean": mean, "load_max": peak,
            "load_at_start": max(start_loads) if all(x is not None for x in start_loads) else None,
            "foreign_mean": foreign, "load_note": note, "rc": max(calls, key=lambda c: c["end"])["rc"],
            "commit": commit, "date": dt.datetime.fromtimestamp(start, dt.timezone.utc).date().isoformat(),
            "started_utc": first["started_utc"]}


def _figures(calls: list[dict]) -> list[tuple[str, str]]:
    figures = [pf for c in calls for pf in c["figures"]]
    return [pf for i, pf in enumerate(figures) if pf not in figures[:i]]


def row(logs: list[Path], root: Path, load: Path | None, tier: str, cores: int, commit: str, extra: str = "") -> dict:
    """One row for the calls of one NAME (see the module docstring); a call naming no figure (the
    rest of `all`: claims tables, notebooks) is labelled by its NAME."""
    calls = [c for log in logs for c in parse_log(log)]
    figures = _figures(calls)
    label = " + ".join(f"{p}/{f}" for p, f in figures) or f"{calls[0]['name']} (no figure named: the rest of `all`)"
    return _calls_row(calls, figures, label, root, load, tier, cores, commit, extra)


def total_row(logs: list[Path], name: str, root: Path, load: Path | None, tier: str, cores: int, commit: str,
              extra: str = "") -> dict:
    """One row for every call of one timing: the tier end to end, each run counted once."""
    calls = [c for log in logs for c in parse_log(log)]
    out = _calls_row(calls, _figures(calls), name, root, load, tier, cores, commit, extra)
    return {**out, "total": True}


def _known(value) -> bool:
    return value is not None and value == value   # NaN: a column this row has no value in


def _budget(r: pd.Series) -> bool:
    if _known(r.get("restored")) and r.restored > 0:   # part of the figures' runs: it times no tier
        return False
    if not _known(r.get("foreign_mean")):   # an older log: the load alone
        return quiet(r.load_max)
    if _known(r.get("total")) and bool(r.get("total")):   # the tier's start: the load rule
        if not (_known(r.get("load_at_start")) and r.load_at_start <= START_LOAD):
            return False
    return bool(r.foreign_mean <= FOREIGN_MAX)


def with_budget_figure(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with `budget_figure`: whether the row may size a tier (see the module docstring)."""
    table = table.assign(budget_figure=[_budget(r) for _, r in table.iterrows()])
    totals = table.get("total", pd.Series(False, index=table.index)).fillna(False).astype(bool)
    for i in table.index[totals]:   # a total sizes the tier only when each of its calls does
        parts = table[~totals & (table.commit == table.commit[i]) & (table.tier == table.tier[i])]
        table.loc[i, "budget_figure"] = bool(table.budget_figure[i] and parts.budget_figure.all())
    return table


def budget_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a tier's budget may be computed from: those timed on a quiet machine."""
    return table[with_budget_figure(table).budget_figure]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", type=Path, action="append", required=True, help="a driver log (repeatable)")
    p.add_argument("--results", type=Path, required=True, help="the results root the call wrote (its runs' summaries)")
    p.add_argument("--commit", required=True, help="the commit whose clean export ran the call")
    p.add_argument("--load", type=Path, default=None, help="'<epoch s> <load>' samples")
    p.add_argument("--tier", default="paper")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--note", default="", help="what else ran beside these calls (appended to load_note)")
    p.add_argument("--total", default=None, help="add a row of every --log's calls under this label")
    p.add_argument("--out", type=Path, default=Path("results/bench"))
    args = p.parse_args(argv)
    groups: dict[str, list[Path]] = {}
    for log in args.log:
        groups.setdefault(parse_log(log)[0]["name"], []).append(log)
    rows = [row(logs, args.results, args.load, args.tier, args.cores, args.commit, args.note) for logs in groups.values()]
    if args.total:
        rows.append(total_row(args.log, args.total, args.results, args.load, args.tier, args.cores, args.commit, args.note))
    new = pd.DataFrame(rows)
    path = args.out / OUT_NAME
    if path.exists():
        old = pd.read_csv(path, dtype={"commit": str})
        keep = ~old.set_index(KEY).index.isin(new.set_index(KEY).index)
        new = pd.concat([old[keep], new], ignore_index=True)
    new = with_budget_figure(new)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    new.to_csv(tmp, index=False)
    tmp.replace(path)
    print(new.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
