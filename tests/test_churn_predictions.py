"""Runs write every number the churn analysis needs: a real CTR run writes each final model's
validation p(click) (val_predictions_<model>.npy), and analysis/paper_table.py computes churn
from those files alone, importing no model code (and no torch)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import launch_run

from codist import config

ROOT = Path(__file__).resolve().parents[1]
CTR = {"name": "ctr", "workload": {"name": "ctr", "train_size": 2000, "val_size": 500},
       "optimizer": {"name": "adagrad", "lr": 0.03, "weight_decay": 0.0},
       "parallel": {"world_size": 1}, "train": {"steps": 4, "batch_per_rank": 32, "eval_every": 4, "eval_batch": 500,
                                                "save_model": True},
       "launch": {"launcher": "warm", "threads_per_rank": 1}}   # the session's warm server (conftest)


def test_paper_table_imports_no_model_code():
    code = ("import sys; sys.path.insert(0, 'analysis'); import paper_table; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('codist.workloads.') "
            "and not m.endswith(('_config', '.schema', '.metrics'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_ctr_runs_write_predictions_and_churn_reads_them(tmp_path):
    from codist.workloads import build_workload
    from codist.workloads.ctr import click_probabilities, load_model
    sys.path.insert(0, str(ROOT / "analysis"))
    import paper_table

    runs = [launch_run(tmp_path / f"s{seed}", {"seed": seed}, base=CTR) for seed in (0, 1)]
    probs = []
    for run in runs:
        saved = np.load(run / "val_predictions_0.npy")
        cfg = config.load(run / "config.yaml")
        workload = build_workload(cfg.workload, cfg.seed)
        torch.set_num_threads(1)
        rebuilt = click_probabilities(load_model(workload, run / "model_0.pt"), workload.val_dataset()).numpy()
        assert saved.shape == (500,) and saved.dtype == np.float64
        np.testing.assert_allclose(saved, rebuilt, rtol=1e-12, atol=0)
        probs.append(saved)
    manifest = {"runs": [{"series": "s", "seed": seed, "run_dir": str(run)} for seed, run in zip((0, 1), runs)]}
    (pair, churn), = paper_table.churn_values(manifest, "s", "0")
    assert pair == "0-1" and churn == pytest.approx(float(np.abs(probs[0] - probs[1]).mean()), rel=1e-12)
    assert churn > 0
    assert not (runs[0] / "val_predictions_0.json").exists()
    assert json.loads((runs[0] / "summary.json").read_text())["workload"] == "ctr"
