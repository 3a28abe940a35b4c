"""The rank's entry point as phases: the world-size check at set-up (a real rank process) and
probes logged only when asked for, which the plan asks for the figures that plot them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY, comparable, deep_update, launch_run, read_rows

from codist import config

ROOT = Path(__file__).resolve().parents[1]


def test_a_rank_whose_world_is_not_the_configs_fails_with_one_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, {"parallel": {"world_size": 2}})))
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29731"}
    out = subprocess.run([sys.executable, "-m", "codist.rank.train", "--config", str(path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines == ["codist: parallel.world_size=2 but the launcher started 1 rank(s) (WORLD_SIZE=1); "
                     "launch with codist run, or make them equal"]


def test_probes_are_not_part_of_the_run_id():
    plain = config.validate(TINY)
    probed = config.validate(deep_update(TINY, {"train": {"probes": ["init_distance"]}}))
    assert plain.run_id() == probed.run_id() and plain.train.probes == []
    with pytest.raises(config.ConfigError, match="train.probes"):
        config.validate(deep_update(TINY, {"train": {"probes": ["init_distnce"]}}))


def test_the_plan_asks_for_the_probes_a_figure_plots():
    sys.path.insert(0, str(ROOT / "workflows"))
    from experiments import load_plan
    plan = load_plan(ROOT / "replications", "embedded")
    for (paper, fig_id), fig in plan.figures.items():
        plots = "init_distance" in (fig.spec.get("panels") or [])
        for run in fig.runs:
            if plots:
                assert plan.configs[run.run_id].train.probes == ["init_distance"], (paper, fig_id)
                assert "probes:\n  - init_distance" in plan.config_text(run.run_id)
    assert any("init_distance" in (f.spec.get("panels") or []) for f in plan.figures.values())
    assert any(not c.train.probes for c in plan.configs.values())


@pytest.mark.slow
def test_init_distance_is_logged_only_when_asked(tmp_path):
    plain = read_rows(launch_run(tmp_path / "plain", {}))
    probed = read_rows(launch_run(tmp_path / "probed", {"train": {"probes": ["init_distance"]}}))
    assert all("init_distance" not in r for r in plain) and all(r["init_distance"] > 0 for r in probed)
    # the probe only measures: the training is the same
    assert [{k: v for k, v in r.items() if k != "init_distance"} for r in comparable(probed)] == \
        comparable(plain)
