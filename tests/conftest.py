"""Shared fixtures: small run configs written to tmp_path."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# A run that trains in a second or two: the embedded image task, a narrow resnet8.
TINY = {
    "name": "tiny",
    "workload": {"name": "cifar", "train_size": 512, "val_size": 128, "width": 8},
    "parallel": {"world_size": 1},
    "train": {"steps": 6, "batch_per_rank": 16, "eval_every": 3, "eval_batch": 64},
    "launch": {"launcher": "torchrun", "threads_per_rank": 1},  # same float order in every run
}


def deep_update(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_update(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture
def write_config(tmp_path):
    """write_config(extra_mapping, name=...) -> path of a YAML run config based on TINY."""
    def write(extra: dict | None = None, name: str = "run.yaml", base: dict = TINY) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(deep_update(base, extra or {})))
        return path
    return write


def launch_run(out_dir: Path, extra: dict, base: dict = TINY) -> Path:
    """Validate TINY + extra, launch it for real, return the run directory (fails loudly)."""
    from codist import config, launch
    cfg = config.validate(deep_update(base, extra), f"test config {out_dir.name}")
    assert launch.run(cfg, out_dir) == 0, f"run {out_dir} failed"
    return out_dir


def read_summary(run: Path) -> dict:
    import json
    return json.loads((run / "summary.json").read_text())


def read_rows(run: Path) -> list[dict]:
    import json
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
