"""What the benchmark scripts share: run one codist config with the real launcher in a temporary
directory and return what it left (summary.json, metrics.jsonl rows), deep-merge config
overrides onto a preset, and note the machine's load.

The runs go through `codist.launching.launch.run` (the same path as `codist run`), so every number is
the harness's own, not a re-implementation of it. The load average is recorded beside each
timing because this 2-core machine is shared: a timing taken while someone else's tests run
is slower, and the raw rows must show it.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from codist import config
from codist.launching import launch

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "replications" / "presets" / "embedded"


merge = config.deep_merge   # a preset with a benchmark's overrides merged in


def preset(name: str) -> dict:
    """The raw mapping of replications/presets/embedded/<name>.yaml (not yet validated)."""
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text())


def loadavg() -> float:
    """1-minute load average (runnable processes); above the core count, timings are inflated."""
    return round(os.getloadavg()[0], 2)


# A timing taken at this 1-minute load average or above decides nothing (2 on this 2-core machine:
# at load 10-35 one LM update measured 5.2x its quiet time and sized the Anil paper tier wrongly).
QUIET_LOAD = 2.0


def quiet(load: float | None) -> bool:
    """Whether a timing taken at this highest 1-minute load average may decide anything (None or NaN:
    not sampled, so no)."""
    return load is not None and load == load and load < QUIET_LOAD


def refuse_loaded(rows: list[dict], key: str = "loadavg") -> tuple[list[dict], list[str]]:
    """(the rows timed on a quiet machine, one line per row refused): a row whose `key` (the highest
    load average seen while it was timed) reached QUIET_LOAD, or that has none, is not a figure."""
    kept, refused = [], []
    for row in rows:
        load = row.get(key)
        if not quiet(load):
            refused.append(f"refused, not written: {row.get('model', row.get('workload', '?'))} batch "
                           f"{row.get('batch', '?')}: load average {load} (a timing counts below {QUIET_LOAD})")
        else:
            kept.append(row)
    return kept, refused


def run(raw: dict, source: str, keep: Path | None = None) -> tuple[dict, list[dict]]:
    """Validate `raw`, launch every rank, wait; return (summary.json, metrics.jsonl rows).

    Raises SystemExit naming the config if the run fails. With `keep`, the run directory is
    written there instead of a temporary folder (for inspection)."""
    cfg = config.validate(raw, source)
    with tempfile.TemporaryDirectory(prefix="codist-bench-") as tmp:
        out = Path(keep) if keep else Path(tmp) / "run"
        rc = launch.run(cfg, out)
        if rc != 0:
            raise SystemExit(f"{source}: codist run failed (exit code {rc}); config:\n{json.dumps(raw, indent=1)}")
        summary = json.loads((out / "summary.json").read_text())
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return summary, rows


def replace_rows(path: str | os.PathLike, table: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """`table` with the rows of the csv at `path` (if any) whose `key` it does not hold: a benchmark run
    replaces what it measured and keeps the rest, so a table can be completed across quiet windows."""
    path = Path(path)
    if not path.exists():
        return table
    old = pd.read_csv(path)
    if len(table):
        now = set(map(tuple, table[key].astype(str).values))
        old = old[[tuple(k) not in now for k in old[key].astype(str).values]]
    return pd.concat([old, table], ignore_index=True)


def write_csv(df, out_dir: str | os.PathLike, name: str) -> Path:
    """Write `df` to <out_dir>/<name> atomically (temp file, then rename), return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = path.with_suffix(path.suffix + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)
    return path


def write_quiet(rows: list[dict], out_dir: str | os.PathLike, name: str) -> int:
    """Write the rows timed on a quiet machine to <out_dir>/<name> (refuse_loaded), print a line per
    row refused to stderr; the exit code: 1 if any was refused."""
    kept, refused = refuse_loaded(rows)
    if kept:
        write_csv(pd.DataFrame(kept), out_dir, name)
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused else 0
