"""A plugin algorithm and a plugin workload go through plan -> run -> claims -> budget with no edit
outside their own files (issue 25 item 3): tests/toy_algorithm.py (toy_broadcast) and
tests/toy_workload.py (toy_blobs, its rates in tests/toy_throughput.yaml), named in CODIST_PLUGINS,
and a tiny experiments file in a temporary folder. The real Snakefile plans it, trains its six runs
(real `codist run`s) and judges its claim (analysis/claims.py: the plugin metric's direction comes
from the workload's registration), and `python workflows/budget.py` prices its full-scale runs (the
model name and rates from the workload's registration and file). The in-process tests: the
plugin's data check and data needs, and its metric's direction, as the registrations give them."""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def plugin_env() -> dict:
    """The environment with the plugins named, read when a test runs: the session's warm-server
    folder and generated-data cache (tests/conftest.py) are set by then, not at import."""
    return {**os.environ, "CODIST_PLUGINS": "toy_algorithm,toy_workload",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}


STEPS, BATCH, SEEDS = 10, 8, [0, 1, 2]
BASE = {"workload": {"name": "toy_blobs"}, "optimizer": {"lr": 0.1},
        "train": {"steps": STEPS, "batch_per_rank": BATCH, "eval_every": 5},
        # warm: the six runs fork from one server that imported the plugins once (was fork: torch and
        # DeepSpeed imported by every run's launcher)
        "launch": {"device": "cpu", "launcher": "warm", "threads_per_rank": 1}}
SERIES = {"broadcast": {"algorithm": {"name": "toy_broadcast", "every": 5}, "parallel.models": 2,
                        "parallel.world_size": 2},
          "alone": {}}
CLAIM = {"id": "bcast", "claim": "broadcasting model 0 every 5 updates lowers the toy error", "figure": "f",
         "basis": "step-matched", "measure": "final", "a": "broadcast", "b": "alone", "metric": "val_toy_error"}


def toy_replications(root: Path) -> Path:
    scale = {"base": BASE, "seeds": SEEDS, "series": SERIES}
    doc = {"paper": "toy", "source": "a test",
           "figures": {"f": {"title": "plugins", "source": "Fig. 0", "kind": "curves", "panels": ["val_toy_error"],
                             "scales": {"embedded": scale, "full": scale}}},
           "claims": [CLAIM]}
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


@pytest.mark.slow   # six real runs, their tables and claims through Snakemake: 380 s at load 31 on 2 cores
def test_plugins_go_through_plan_run_claims_and_budget(tmp_path):
    reps = toy_replications(tmp_path / "reps")
    proc = subprocess.run([str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "-c2",
                           "--config", f"replications={reps}", "--", "results/embedded/toy/claims.csv"],
                          capture_output=True, text=True, timeout=900, env=plugin_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    # the runs: each series' summaries (plugin algorithm and workload as named, the metric logged)
    finals = {}
    for path in (tmp_path / "results/embedded/runs").glob("*/summary.json"):
        s = json.loads(path.read_text())
        cfg = yaml.safe_load((path.parent / "config.yaml").read_text())
        assert cfg["workload"]["name"] == "toy_blobs" and s["metric"] == "val_toy_error"
        finals[(s["algorithm"], cfg["seed"])] = s["models"]["0"]["final"]["val_toy_error"]
    assert sorted(finals) == sorted((a, seed) for a in ("allreduce", "toy_broadcast") for seed in SEEDS)

    # the claim: lower is better for val_toy_error (the plugin's registration), so the effect is
    # alone's error minus broadcast's, per seed
    [row] = list(csv.DictReader((tmp_path / "results/embedded/toy/claims.csv").open()))
    effects = [finals[("allreduce", s)] - finals[("toy_broadcast", s)] for s in SEEDS]
    assert row["metric"] == "val_toy_error" and int(row["n"]) == 3
    assert float(row["effect_mean"]) == pytest.approx(statistics.mean(effects), abs=1e-12)
    assert row["verdict"].split(":")[0] in ("holds", "does not hold", "inconclusive", "underpowered"), row

    # the budget: every full-scale run is STEPS x BATCH samples at the plugin file's 0.02 (fp32) and
    # 0.04 (bf16) samples/s on an a100, no extra forward passes: 4,000 s = 1.111 h fp32 a run;
    # 3 one-rank and 3 two-rank runs: 3 x 1.111 + 3 x 2 x 1.111 = 10 GPU-hours fp32, 5 bf16
    out = tmp_path / "budget.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "workflows" / "budget.py"), "--replications", str(reps), "--csv", str(out),
                           "--measured", str(tmp_path / "none.csv")], capture_output=True, text=True, env=plugin_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {(r["paper"], r["figure"]): r for r in csv.DictReader(out.open())}
    f = rows[("toy", "f")]
    assert (f["runs"], f["gpus_per_run"]) == ("6", "1-2")
    assert float(f["hours_fp32"]) == pytest.approx(STEPS * BATCH / 0.02 / 3600, abs=1e-3)
    assert float(f["gpu_hours_fp32"]) == pytest.approx(10.0, abs=1e-3)
    assert float(f["gpu_hours_bf16"]) == pytest.approx(5.0, abs=1e-3)
    assert f["basis"] == "published"


def test_the_plugin_workloads_data_check_and_needs(tmp_path, monkeypatch):
    monkeypatch.setenv("CODIST_PLUGINS", "toy_algorithm,toy_workload")
    from codist import config, datacheck
    from codist.launching.inputs import check_inputs
    (tmp_path / "blobs.csv").write_text("0.5,1.0,0\n1.5,0.0,1\n2.0,x,1\n")
    problems, _ = datacheck.check("toy_blobs", tmp_path)
    assert problems == [f"{tmp_path / 'blobs.csv'}:3: not comma-separated numbers; expected "
                        "<data_dir>/blobs.csv: one sample a line, its features then its class (comma-separated)"]
    (tmp_path / "blobs.csv").write_text("0.5,1.0,0\n1.5,0.0,1\n")
    assert datacheck.main(["check", "toy_blobs", str(tmp_path)]) == 0     # the CLI's choices know it
    cfg = config.validate({"workload": {"name": "toy_blobs", "dataset": "csv", "data_dir": str(tmp_path / "no")}})
    with pytest.raises(config.ConfigError, match=r"workload.data_dir: '.*/no' does not exist; expected <data_dir>/blobs"):
        check_inputs(cfg)


def test_the_plugin_metrics_direction_reaches_the_analysis(monkeypatch):
    monkeypatch.setenv("CODIST_PLUGINS", "toy_workload")
    from codist.workloads import metrics
    assert metrics.higher_is_better("val_toy_error") is False
    assert "val_toy_error" in metrics.LOGGED["toy_blobs"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
