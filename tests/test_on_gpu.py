"""`make gpu-anil`'s CPU-side parts (issue 50 item 4): --config device=cuda moves every planned run's
launch to CUDA without changing a run id (workflows/on_gpu.py), through the real Snakefile; the GPU
results never go into the CPU reference; machine.json names a GPU run's GPUs; the claims analysis
reads only the claims asked for. No GPU here: the CUDA runs themselves are not run by these tests."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis import claims
from test_workflow import BASE, figure, toy_paper
from test_workflow_run import snakemake
from workflows import machine
from workflows.experiments import load_plan
from workflows.on_gpu import LAUNCH, on_cuda
from workflows.workflow_config import WorkflowConfigError, check

ROOT = Path(__file__).resolve().parent.parent


def test_every_run_of_the_anil_tiers_moves_to_cuda_with_its_run_id():
    plan = load_plan(ROOT / "replications", "embedded", None, "anil-ablations")
    before = {rid: cfg.model_dump() for rid, cfg in plan.configs.items()}
    moved = on_cuda(plan)
    assert set(moved.configs) == set(before) and len(before) > 60
    for rid, cfg in moved.configs.items():
        assert cfg.run_id() == rid
        assert (cfg.launch.device, cfg.launch.launcher, cfg.launch.backend) == ("cuda", "torchrun", "gloo")
        d, was = cfg.model_dump(), before[rid]
        assert {k: v for k, v in d.items() if k != "launch"} == {k: v for k, v in was.items() if k != "launch"}


def test_the_snakefile_writes_cuda_configs_into_a_root_of_their_own(tmp_path):
    reps = toy_paper(tmp_path / "reps", {"figA": figure({"one": {}, "two": {"parallel.world_size": 2}})})
    plan = load_plan(reps, "embedded")
    rids = sorted(plan.configs)
    targets = [f"results-gpu/embedded/configs/{r}.yaml" for r in rids]
    snakemake(tmp_path / "w", reps, "results=results-gpu", "device=cuda", "-c1", "--", *targets)
    for rid in rids:
        text = yaml.safe_load((tmp_path / "w" / "results-gpu/embedded/configs" / f"{rid}.yaml").read_text())
        assert {k: text["launch"][k] for k in LAUNCH} == LAUNCH
    with pytest.raises(WorkflowConfigError, match="own results root, never into the committed CPU reference"):
        check({"device": "cuda"})
    with pytest.raises(WorkflowConfigError, match="device: cuda with ledger"):
        check({"device": "cuda", "results": "results-gpu", "ledger": "keep"})
    with pytest.raises(WorkflowConfigError, match="device"):
        check({"device": "gpu", "results": "results-gpu"})


def test_machine_json_names_a_cuda_runs_gpus(tmp_path):
    hw = {"cpu_model": "Xeon", "torch_cpu_capability": "AVX512", "blas": "mkl", "torch_threads": 4}
    for name, device, gpus in (("a", "cuda:0", ["NVIDIA H200"]), ("b", "cuda:0", ["NVIDIA H200"]), ("c", "cpu", None)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"device": device, "packages": {"torch": "2"},
                                                             "hardware": {**hw, **({"gpus": gpus} if gpus else {})}}))
    got = machine.summarize(sorted(tmp_path.glob("*.json")))
    assert {m["runs"]: m.get("gpus") for m in got} == {2: "NVIDIA H200", 1: None}
    assert [m.get("device") for m in got if m["runs"] == 2] == ["cuda"]


def test_the_claims_analysis_reads_only_the_claims_asked_for(tmp_path, capsys):
    paper = ROOT / "replications" / "anil2018" / "experiments.yaml"
    figures = ROOT / "results" / "embedded" / "anil2018"
    costs = ROOT / "results" / "bench" / "regime_cost.csv"
    out = tmp_path / "c.csv"
    assert claims.main(["--paper", str(paper), "--figures", str(figures), "--costs", str(costs), "--claims",
                        "fig2a-loss", "fig4", "--csv", str(out), "--markdown", str(tmp_path / "c.md")]) == 0
    got = pd.read_csv(out)
    committed = pd.read_csv(figures / "claims.csv").set_index("id")
    assert list(got["id"]) == ["fig2a-loss", "fig4"]
    for row in got.itertuples():
        assert row.verdict == committed.loc[row.id, "verdict"]
    assert not (tmp_path / "sequential.csv").exists()   # a partial table writes no sequential state
    assert claims.main(["--paper", str(paper), "--figures", str(figures), "--claims", "fig9",
                        "--csv", str(out), "--markdown", str(tmp_path / "c.md")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no claim 'fig9'" in err and str(paper) in err
