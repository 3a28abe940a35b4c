"""Two-phase distillation (Anil et al. 2018, Sec. 3.4.1): a student trained against a finished
run's saved models, and how the workflow orders the two runs."""
from __future__ import annotations

import sys

import pytest
import torch
import yaml

from codist import config
from conftest import ROOT, launch_run, read_rows, read_summary

sys.path.insert(0, str(ROOT / "workflows"))
from experiments import ExperimentsError, load_plan  # noqa: E402


def test_teacher_run_must_be_a_run_id():
    with pytest.raises(config.ConfigError, match="teacher_run"):
        config.validate({"algorithm": {"name": "distill", "teacher_run": "../elsewhere"}}, "x.yaml")


@pytest.mark.slow
def test_student_learns_from_the_saved_ensemble(tmp_path):
    teacher = launch_run(tmp_path / "runs" / "abcdefabcdef",
                         {"algorithm": {"name": "ensemble"}, "parallel": {"world_size": 2, "models": 2},
                          "train": {"save_model": True}})
    assert (teacher / "model_0.pt").exists() and (teacher / "model_1.pt").exists()
    student = launch_run(tmp_path / "runs" / "student", {"algorithm": {"name": "distill", "teacher_run": "abcdefabcdef"},
                                                         "train": {"probes": ["init_distance"]}})
    assert read_summary(student)["steps"] == 6 and read_rows(student)[-1]["train_loss"] > 0
    # the same student with alpha = 0 is plain training: the teacher term changed the updates
    plain = launch_run(tmp_path / "runs" / "plain", {"algorithm": {"name": "distill", "teacher_run": "abcdefabcdef",
                                                                    "alpha": 0.0}})
    a = torch.load(student / "model_0.pt", weights_only=True)
    b = torch.load(plain / "model_0.pt", weights_only=True)
    assert any(not torch.equal(a[k], b[k]) for k in a)
    # init_distance in the last row = |final parameters - the initialisation rebuilt from the seed|
    from codist.workloads import build_workload
    cfg = config.load(student / "config.yaml")
    torch.manual_seed(cfg.seed * 1009)   # Algorithm.model_seed() of model 0
    init = build_workload(cfg.workload, cfg.seed).build_model()
    dist = sum(((a[k] - p.detach()) ** 2).sum() for k, p in init.named_parameters()) ** 0.5
    assert read_rows(student)[-1]["init_distance"] == pytest.approx(float(dist), rel=1e-5)


@pytest.mark.slow
def test_missing_teacher_files_fail_clearly(tmp_path):
    from codist.launching import launch
    cfg = config.validate({"name": "s", "workload": {"name": "cifar", "train_size": 64, "val_size": 32, "width": 4},
                           "algorithm": {"name": "distill", "teacher_run": "000000000000"},
                           "train": {"steps": 2, "batch_per_rank": 8, "eval_every": 2},
                           "launch": {"launcher": "warm", "threads_per_rank": 1}}, "t")
    assert launch.run(cfg, tmp_path / "runs" / "s") != 0
    log = "".join(p.read_text() for p in (tmp_path / "runs" / "s" / ".ranks").glob("*.json"))
    assert "000000000000" in log and "does not exist" in log


def test_series_reference_gives_the_teacher_run_id_and_an_upstream_edge(tmp_path):
    base = {"workload": {"name": "cifar"}, "train": {"steps": 10}}
    figure = {"title": "t", "kind": "curves", "scales": {"embedded": {"base": base, "seeds": [0, 1], "series": {
        "ens": {"algorithm.name": "ensemble", "parallel.world_size": 2, "parallel.models": 2},
        "student": {"algorithm.name": "distill", "algorithm.teacher_run": "@ens"}}}}}
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "experiments.yaml").write_text(yaml.safe_dump({"paper": "toy", "figures": {"f": figure}}))
    plan = load_plan(tmp_path, "embedded")
    runs = {(r.series, r.seed): r.run_id for r in plan.figure("toy", "f").runs}
    for seed in (0, 1):
        assert plan.upstream(runs[("student", seed)]) == [runs[("ens", seed)]]
    assert plan.upstream(runs[("ens", 0)]) == []
    figure["scales"]["embedded"]["series"]["student"]["algorithm.teacher_run"] = "@nobody"
    (tmp_path / "toy" / "experiments.yaml").write_text(yaml.safe_dump({"paper": "toy", "figures": {"f": figure}}))
    with pytest.raises(ExperimentsError, match="'@nobody' names no series"):
        load_plan(tmp_path, "embedded")
