"""The budget planner (src/codist/budget.py): hours and GPU-hours of a hand-made plan computed by hand,
teacher passes counted, runs shared by figures counted once per paper, the real full plan covered."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codist import budget
from codist.config import validate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from experiments import Figure, Plan, RunRef  # noqa: E402

TABLE = """
gpus: {g: "a test GPU"}
sources: {s: "made up for the test"}
models:
  cifar_resnet20:
    unit: image
    macs: 2.0
    throughput: {g: {fp32: 1000, bf16: 4000, source: s}}
  ctr_mlp:
    unit: sample
    macs: 1.0
    derive: {from: cifar_resnet20, by: macs}
"""


def cfg(**over):
    raw = {"workload": {"name": "cifar", "arch": "resnet20"}, "algorithm": {"name": "allreduce"},
           "parallel": {"world_size": 2}, "train": {"steps": 3600, "batch_per_rank": 100}}
    for key, value in over.items():
        raw[key] = value
    return validate(raw)


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "throughput.yaml"
    path.write_text(TABLE)
    return budget.load_throughput(path)


@pytest.fixture
def plan():
    runs = {
        # 3,600 steps x 100 images / 1,000 img/s = 360 s = 0.1 h on 2 GPUs
        "aaaaaaaaaaaa": cfg(),
        # a teacher forward from step 1,800 of 3,600: x (1 + 0.5 / 3) -> 0.11667 h on 4 GPUs
        "bbbbbbbbbbbb": cfg(algorithm={"name": "codistill", "burn_in": 1800},
                            parallel={"world_size": 4, "models": 2}),
        # ctr_mlp derived at twice cifar's rate (half the MACs): 7,200 x 100 / 2,000 = 0.1 h on 1 GPU
        "cccccccccccc": cfg(workload={"name": "ctr"}, parallel={"world_size": 1},
                            train={"steps": 7200, "batch_per_rank": 100}),
    }
    p = Plan("full", configs=runs)
    figs = {("p1", "f1"): ["aaaaaaaaaaaa", "bbbbbbbbbbbb"], ("p1", "f2"): ["aaaaaaaaaaaa", "cccccccccccc"],
            ("p2", "f3"): ["cccccccccccc"]}
    for (paper, fig), ids in figs.items():
        p.figures[(paper, fig)] = Figure(paper, fig, "full", fig, "", "curves", "", ["s"],
                                         [RunRef("s", i, rid) for i, rid in enumerate(ids)])
    return p


def test_hand_made_plan(table, plan):
    rows = {(r.paper, r.figure): r for r in budget.plan_budget(plan, table, "g")}
    b_hours = 0.1 * (1 + 0.5 / 3)
    f1, f2, p1, p2, everything = (rows[k] for k in [("p1", "f1"), ("p1", "f2"), ("p1", ""), ("p2", ""),
                                                     ("all", "all")])
    assert f1.hours["fp32"] == pytest.approx(b_hours)
    assert f1.gpu_hours["fp32"] == pytest.approx(0.1 * 2 + b_hours * 4)
    assert f1.gpu_hours["bf16"] == pytest.approx((0.1 * 2 + b_hours * 4) / 4)
    assert f2.hours["fp32"] == pytest.approx(0.1) and f2.gpu_hours["fp32"] == pytest.approx(0.3)
    assert f2.basis == "derived+published"
    # run a is in both of p1's figures: its paper total counts it once
    assert (p1.runs, p1.gpu_hours["fp32"]) == (3, pytest.approx(0.2 + b_hours * 4 + 0.1))
    assert (p2.runs, p2.gpu_hours["fp32"]) == (1, pytest.approx(0.1))
    assert (everything.runs, everything.gpu_hours["fp32"]) == (3, pytest.approx(p1.gpu_hours["fp32"]))
    assert f1.gpus == (2, 4) and f1.fits_node


def test_no_rate_is_reported_not_guessed(table, plan):
    plan.configs["aaaaaaaaaaaa"] = cfg(workload={"name": "imagenet", "arch": "resnet50"})
    rows = {(r.paper, r.figure): r for r in budget.plan_budget(plan, table, "g")}
    assert rows[("p1", "f1")].gpu_hours["fp32"] is None
    assert "n/a" in budget.markdown(list(rows.values()), table, "g", "cmd")


def test_bad_table_names_the_key(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TABLE.replace("source: s", "source: nowhere"))
    with pytest.raises(budget.BudgetError, match=r"models.cifar_resnet20.throughput.g.source: 'nowhere'"):
        budget.load_throughput(path)
    path.write_text(TABLE.replace("fp32: 1000", "fp32: -1"))
    with pytest.raises(budget.BudgetError, match=r"throughput.g.fp32: expected a positive number"):
        budget.load_throughput(path)


HEAD = "model,gpu,device,device_name,precision,float32_matmul_precision,batch_per_gpu,units_per_s,date\n"


def test_measured_rows_from_gpu_check_csv(table, tmp_path):
    path = tmp_path / "gpu.csv"
    path.write_text(HEAD + "cifar_resnet20,h200,cuda,NVIDIA H200,bf16,high,128,50000,2026-01-01\n"
                           "cifar_resnet20,cpu,cpu,x86,bf16,high,2,10,2026-01-01\n")
    assert budget.add_measured(table, path) == ["h200"]
    rate = table.rate("cifar_resnet20", "h200", "bf16")
    assert (rate.units_per_s, rate.kind) == (50000, "measured")
    assert table.rate("cifar_resnet20", "cpu", "bf16") is None


def test_an_fp32_run_with_tf32_is_priced_at_the_tf32_rate(table, plan, tmp_path):
    """Every full-scale run computes its fp32 products in TF32 (train.tf32, the default): its rate is
    the TF32 one, a table's fp32 column (its TF32 rate, replications/throughput.yaml says) or a
    measured tf32 row; a measured strict-fp32 row prices only a run with train.tf32: false."""
    tf32_run, fp32_run = cfg(), cfg(train={"steps": 3600, "batch_per_rank": 100, "tf32": False})
    # the table's fp32 column is its TF32 rate (1,000 img/s): 3,600 x 100 / 1,000 = 0.1 h; no strict fp32 rate
    assert budget.run_hours(tf32_run, table, "g", "fp32")[0] == pytest.approx(0.1)
    assert budget.run_hours(fp32_run, table, "g", "fp32") is None
    path = tmp_path / "gpu.csv"
    path.write_text(HEAD + "cifar_resnet20,g,cuda,G,tf32,high,100,2000,2026-01-01\n"
                           "cifar_resnet20,g,cuda,G,fp32,highest,100,500,2026-01-01\n")
    budget.add_measured(table, path)
    # measured: 2,000 img/s with TF32 -> 0.05 h; 500 img/s in fp32 throughout -> 0.2 h
    assert budget.run_hours(tf32_run, table, "g", "fp32")[0] == pytest.approx(0.05)
    assert budget.run_hours(fp32_run, table, "g", "fp32")[0] == pytest.approx(0.2)
    assert budget.run_hours(tf32_run, table, "g", "bf16")[0] == pytest.approx(0.025)   # the table's 4,000 img/s


def test_a_measured_row_must_record_the_math_it_ran(table, tmp_path):
    """An older gpu_check's "fp32" row ran fp32 matmuls beside TF32 convolutions, and records no
    matmul precision: one line naming the file and the row, never a rate of unknown math."""
    path = tmp_path / "gpu.csv"
    path.write_text("model,gpu,device,device_name,precision,batch_per_gpu,units_per_s,date\n"
                    "cifar_resnet20,h200,cuda,NVIDIA H200,fp32,128,50000,2026-01-01\n")
    with pytest.raises(budget.BudgetError) as e:
        budget.add_measured(table, path)
    assert str(e.value) == (f"{path}: line 2 (cifar_resnet20, precision 'fp32'): float32_matmul_precision is None, "
                            f"expected 'highest' (a row of an older gpu_check has none); measure it again "
                            f"with `make gpu-check`")
    path.write_text(HEAD + "cifar_resnet20,h200,cuda,NVIDIA H200,tf32,highest,128,50000,2026-01-01\n")
    with pytest.raises(budget.BudgetError, match="line 2 .*precision 'tf32'.*is 'highest', expected 'high'"):
        budget.add_measured(table, path)
    path.write_text(HEAD + "cifar_resnet20,h200,cuda,NVIDIA H200,fp16,high,128,50000,2026-01-01\n")
    with pytest.raises(budget.BudgetError, match="precision must be one of tf32, fp32, bf16"):
        budget.add_measured(table, path)


def test_readme_section_is_replaced(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"a\n{budget.MARK_START}\nold\n{budget.MARK_END}\nb\n")
    budget.update_readme(path, "new\n")
    assert path.read_text() == f"a\n{budget.MARK_START}\nnew\n{budget.MARK_END}\nb\n"
    path.write_text("no markers\n")
    with pytest.raises(budget.BudgetError, match="budget:start"):
        budget.update_readme(path, "new\n")


def test_real_full_plan_every_figure_has_a_row_with_rates():
    from workflows.budget import load_full_plan
    plan = load_full_plan(ROOT / "replications")
    table = budget.load_throughput(ROOT / "replications" / "throughput.yaml")
    rows = budget.plan_budget(plan, table, "a100")
    figures = {(r.paper, r.figure) for r in rows if r.figure not in ("", "all")}
    assert figures == set(plan.figures)
    for r in rows:
        for p in budget.PRECISIONS:
            assert r.gpu_hours[p] and r.gpu_hours[p] > 0, (r.paper, r.figure, p)
    assert rows[-1].runs == len(plan.configs)
