"""What an untested claim's regime would cost (benchmarks/regime_cost.py): priced from measured rates
only, with the right side of each bound, and carried by the claims table."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml

from analysis.claims import UNTESTED, cost_texts, verdict_kind
from analysis.schema import CostRuns, FullRuns
from benchmarks import regime_cost
from benchmarks.regime_cost import CostError, price_embedded


def test_embedded_runs_are_priced_at_the_measured_rates():
    runs = [CostRuns(workload="lm", batch=8192, updates=500, ranks=1, runs=3),
            CostRuns(workload="lm", batch=8192, updates=500, ranks=2, runs=3)]
    cpu = {("lm", 8192): 3.0}
    gpu = {"lm": (32, 0.01)}
    cpu_h, gpu_h, bound, cpu_basis, _ = price_embedded(runs, cpu, gpu)
    assert cpu_h == pytest.approx((500 * 3 + 500 * 2 * 3) * 3.0 / 2 / 3600)   # 4,500 rank-updates, 2 cores
    assert gpu_h == pytest.approx(4500 * 0.01 / 3600) and bound == ">="      # batch 8,192 >= the H200's 32
    assert "3 x 2 rank(s) x 500 updates of lm batch 8192" in cpu_basis
    # below the batch the H200 ran: an upper bound; on both sides: no GPU figure
    small = [CostRuns(workload="lm", batch=16, updates=100)]
    assert price_embedded(small, {("lm", 16): 1.0}, gpu)[2] == "<="
    both = small + runs
    _, g, b, _, _ = price_embedded(both, {("lm", 16): 1.0, **cpu}, gpu)
    assert g is None and b == ""
    # a workload the H200 never ran gives no GPU figure, and the runs after it are still priced on the CPU
    unseen = [CostRuns(workload="ctr", batch=8192, updates=100)] + runs
    cpu_h2, g2, _, basis2, _ = price_embedded(unseen, {("ctr", 8192): 1.0, **cpu}, gpu)
    assert g2 is None and cpu_h2 == pytest.approx(cpu_h + 100 * 1.0 / 2 / 3600)
    assert basis2.count("updates of lm batch 8192") == 2


def test_a_batch_this_cpu_has_not_timed_is_one_line_naming_the_command():
    with pytest.raises(CostError, match=r"efficiency\.csv: no quiet fp32 row for workload 'lm' batch 4 "
                                        r"\(time it: .*efficiency\.py --only lm --batches 4\)"):
        price_embedded([CostRuns(workload="lm", batch=4, updates=1)], {}, {})


def test_only_quiet_fp32_rows_give_a_cpu_rate():
    eff = pd.DataFrame([{"workload": "lm", "batch": 8, "precision": "fp32", "loadavg": 0.9, "codist_s_per_update": 1.0},
                        {"workload": "lm", "batch": 8, "precision": "fp32", "loadavg": 3.0, "codist_s_per_update": 9.0},
                        {"workload": "lm", "batch": 8, "precision": "bf16", "loadavg": 0.9, "codist_s_per_update": 0.5}])
    assert regime_cost.cpu_rates(eff) == {("lm", 8): 1.0}
    assert regime_cost.cpu_loads(eff) == {("lm", 8): 0.9}   # the load beside the rate's own rows


def test_each_priced_claim_records_the_load_beside_its_cpu_timings():
    costs = pd.read_csv(regime_cost.BENCH / "regime_cost.csv")
    assert costs.cpu_loadavg.notna().all() and (costs.cpu_loadavg < 2).all()


def test_a_full_scale_figure_costs_one_h200_what_the_budget_says():
    """price_full's GPU-hours are codist.budget's at the H200's measured rates (one GPU's time is the
    sum over runs), and its CPU bound is the same runs' FLOPs at the CPU's GEMM peak."""
    from codist import budget
    plan, table = regime_cost._full_plan(regime_cost.ROOT / "replications", regime_cost.BENCH)
    gflops = {"transformer_iwslt": 1.0, "transformer_vaswani_wmt_en_de_big": 1.0, "resnet50": 1.0}
    rows = {(r.paper, r.figure): r for r in budget.plan_budget(plan, table, "h200")}
    cpu_h, gpu_h, _, _ = regime_cost.price_full([FullRuns(figure="sodhani2020/sec4")], plan, table,
                                                {**gflops, **{budget.model_key(plan.config(r.run_id)): 2.0
                                                              for r in plan.figures[("sodhani2020", "sec4")].runs}},
                                                100.0)
    assert gpu_h == pytest.approx(rows[("sodhani2020", "sec4")].gpu_hours["fp32"])
    # the CPU bound: every run's samples x 2 GFLOP (forwards of teachers added) at 2 cores x 100 GFLOP/s, to 12
    # digits (a FLOP count started at 1 instead of 0 is 1e-10 of it)
    flops = 0.0
    for rid in dict.fromkeys(r.run_id for r in plan.figures[("sodhani2020", "sec4")].runs):
        cfg = plan.config(rid)
        flops += (cfg.train.steps * (1 + budget.FORWARD_SHARE * budget.extra_forwards(cfg))
                  * cfg.train.batch_per_rank * cfg.parallel.world_size * 2.0)
    assert cpu_h == pytest.approx(flops / (2 * 100.0) / 3600, rel=1e-12) and cpu_h > 0
    twice = regime_cost.price_full([FullRuns(figure="sodhani2020/sec4", times=2)], plan, table,
                                   {budget.model_key(plan.config(r.run_id)): 2.0
                                    for r in plan.figures[("sodhani2020", "sec4")].runs}, 100.0)
    assert twice[0] == pytest.approx(2 * cpu_h, rel=1e-12) and twice[1] == pytest.approx(2 * gpu_h)


def test_the_claims_table_carries_a_cost_only_where_the_regime_was_not_tested(tmp_path):
    costs = tmp_path / "regime_cost.csv"
    pd.DataFrame([{"paper": "p", "claim": "c1", "needs": "bigger runs", "bound": "estimate", "cpu_h_2cores": 5.0,
                   "cpu_bound": "=", "gpu_h_one": 0.25, "gpu_bound": ">=", "gpu": "h200",
                   "cpu_basis": "", "gpu_basis": ""}]).to_csv(costs, index=False)
    assert cost_texts(costs, "p") == {"c1": "=5 h on 2 cores, >=0.25 h on one H200 (regime_cost.csv): bigger runs"}
    assert cost_texts(costs, "other") == {} and cost_texts(None, "p") == {}
    assert verdict_kind("not in the paper's regime: x") in UNTESTED and verdict_kind("holds") not in UNTESTED


def test_every_committed_claim_without_an_in_regime_verdict_carries_its_regime_cost():
    claims = pd.read_csv(regime_cost.ROOT / "results" / "embedded" / "claims.csv")
    untested = claims[claims.verdict.map(verdict_kind).isin(UNTESTED)]
    assert len(untested) > 0
    missing = untested[untested.regime_cost.fillna("").str.len() == 0]
    assert missing.empty, f"no regime cost: {list(zip(missing.paper, missing.id))}"
    costs = pd.read_csv(regime_cost.BENCH / "regime_cost.csv")
    assert set(zip(costs.paper, costs.claim)) == set(zip(untested.paper, untested.id))


def test_runs_without_ranks_are_priced_at_one_rank():
    """Issue 52, mutant S03 (schema.CostRuns.ranks: default 1, > 0): runs that name no ranks are one
    rank's; ranks must be positive, one included."""
    from pydantic import ValidationError
    runs = CostRuns(workload="lm", batch=8, updates=600, runs=2)
    assert runs == CostRuns(workload="lm", batch=8, updates=600, runs=2, ranks=1)
    cpu_h, gpu_h, bound, cpu_basis, _ = price_embedded([runs], {("lm", 8): 3.0}, {"lm": (8, 0.5)})
    assert cpu_h == pytest.approx(2 * 600 * 3.0 / 2 / 3600)        # 1,200 rank-updates on 2 cores
    assert gpu_h == pytest.approx(2 * 600 * 0.5 / 3600) and bound == ">="
    assert cpu_basis.startswith("2 x 1 rank(s) x 600 updates of lm batch 8")
    with pytest.raises(ValidationError, match="ranks"):
        CostRuns(workload="lm", batch=8, updates=600, ranks=0)


def test_a_rate_records_the_highest_load_beside_its_quiet_rows():
    """Issue 52, mutant P06 (regime_cost.cpu_loads): the load recorded beside a (workload, batch) rate
    is the highest of the quiet fp32 rows the rate's median comes from, not a loud or bf16 row's."""
    eff = pd.DataFrame([{"workload": "lm", "batch": b, "precision": p, "loadavg": load, "codist_s_per_update": s}
                        for b, p, load, s in ((8, "fp32", 0.3, 1.0), (8, "fp32", 1.2, 1.1), (8, "fp32", 0.6, 1.2),
                                              (8, "fp32", 3.0, 9.0), (8, "bf16", 1.9, 0.5), (16, "fp32", 0.2, 2.0))])
    assert regime_cost.cpu_rates(eff) == {("lm", 8): 1.1, ("lm", 16): 2.0}
    assert regime_cost.cpu_loads(eff) == {("lm", 8): 1.2, ("lm", 16): 0.2}


def toy_bench(tmp_path):
    """A bench folder: this CPU times lm at batch 64 (2 s an update) and 8 (1 s), quietly; the H200 ran lm
    at batch 32, 0.05 s an update."""
    bench = tmp_path / "bench"
    bench.mkdir()
    pd.DataFrame([{"workload": "lm", "batch": b, "precision": "fp32", "loadavg": 0.5, "codist_s_per_update": s,
                   "gemm_fp32_gflops": 50.0} for b, s in ((64, 2.0), (8, 1.0))]).to_csv(bench / "efficiency.csv",
                                                                                      index=False)
    pd.DataFrame([{"device": "cuda", "workload": "lm",
                   "final_metric": '{"step": 100, "samples": 3200, "wall_s": 5.0, "val_loss": 1.'}]
                 ).to_csv(bench / "codist_check_cuda.csv", index=False)
    pd.DataFrame([{"gpu": "h200", "model": "m", "train_gflops_per_sample": 1.0}]).to_csv(bench / "gpu_throughput.csv",
                                                                                          index=False)
    return bench


def test_a_lower_bound_regime_keeps_only_a_gpu_lower_bound(tmp_path, monkeypatch):
    """Issue 52, mutant P09 (regime_cost.rows, `bound: lower`): where the regime's runs are only known
    from below, both costs are lower bounds: the CPU's '=' becomes '>=', a GPU '>=' (runs at or above
    the batch the H200 ran) stays, and a GPU '<=' (below it) bounds nothing either way: no GPU figure.
    An estimate keeps its bounds (the control). The H200 ran lm at batch 32, 0.05 s an update; this
    CPU times batch 64 at 2 s and batch 8 at 1 s an update; each claim's runs are 100,000 updates."""
    paper = tmp_path / "replications" / "toy"
    paper.mkdir(parents=True)

    def claim(cid, batch, bound):
        return {"id": cid, "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "a": "a",
                "b": "b", "regime_cost": {"needs": "bigger runs", "bound": bound,
                                          "embedded": [{"workload": "lm", "batch": batch, "updates": 100_000}]}}
    (paper / "experiments.yaml").write_text(yaml.safe_dump({
        "paper": "toy", "figures": {"f": {"title": "t", "kind": "curves", "scales": {
            "embedded": {"base": {"seed": 0}, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}},
        "claims": [claim("lower-above", 64, "lower"), claim("lower-below", 8, "lower"),
                   claim("estimate-above", 64, "estimate"), claim("estimate-below", 8, "estimate")]}))
    bench = toy_bench(tmp_path)
    monkeypatch.setattr(regime_cost, "PAPERS", ("toy",))
    got = {r["claim"]: (r["cpu_bound"], r["cpu_h_2cores"], r["gpu_bound"], r["gpu_h_one"])
           for r in regime_cost.rows(tmp_path / "replications", bench)}
    cpu64, cpu8, gpu = (round(100_000 * s / div, 3) for s, div in ((2.0, 2 * 3600), (1.0, 2 * 3600), (0.05, 3600)))
    assert got == {"lower-above": (">=", cpu64, ">=", gpu), "lower-below": (">=", cpu8, "", None),
                   "estimate-above": ("=", cpu64, ">=", gpu), "estimate-below": ("=", cpu8, "<=", gpu)}


def test_bf16_runs_are_priced_at_the_quiet_bf16_rate_and_never_at_fp32s():
    """Issue 50: Anil's saturated designs train in bf16; their runs are priced at the quiet bf16 row of
    their batch (with its load), and a batch timed only in fp32 is the one-line error, not fp32's rate."""
    eff = pd.DataFrame([{"workload": "lm", "batch": 4096, "precision": p, "loadavg": load, "codist_s_per_update": s}
                        for p, load, s in (("fp32", 1.0, 1.7), ("bf16", 1.1, 0.9), ("bf16", 4.0, 5.0))]
                       + [{"workload": "lm", "batch": 8192, "precision": "fp32", "loadavg": 0.9,
                           "codist_s_per_update": 3.7}])
    rates, loads = regime_cost.rate_tables(eff)
    assert rates[("lm", 4096)] == 1.7 and rates[("lm", 4096, "bf16")] == 0.9 and loads[("lm", 4096, "bf16")] == 1.1
    bf16 = CostRuns(workload="lm", batch=4096, updates=600, ranks=2, runs=6, precision="bf16")
    cpu_h, _, _, basis, _ = price_embedded([bf16], rates, {})
    assert cpu_h == pytest.approx(600 * 2 * 6 * 0.9 / 2 / 3600) and basis.endswith("at 0.9 s (bf16)")
    with pytest.raises(CostError, match="no quiet bf16 row for workload 'lm' batch 8192"):
        price_embedded([CostRuns(workload="lm", batch=8192, updates=1, precision="bf16")], rates, {})


def test_reuse_allocator_runs_are_priced_at_lm_levers_quiet_rows_of_the_same_cpu():
    """Issue 50's LM runs use launch.allocator reuse, 1.5-1.8x faster than the system allocator that
    efficiency.csv times: such runs are priced at lm_levers.csv's quiet fused, uncompiled, reuse row of
    efficiency.csv's CPU (another CPU's, a loaded one's, a compiled one's never), and a batch without one
    is the one-line error naming lm_levers.py."""
    eff = pd.DataFrame([{"workload": "lm", "batch": 8192, "precision": "bf16", "loadavg": 1.0,
                         "codist_s_per_update": 2.47, "cpu": "Xeon"}])
    levers = pd.DataFrame([{"cpu": c, "batch": 8192, "precision": "bf16", "lstm": lstm, "compile": comp,
                            "allocator": alloc, "s_per_update": s, "loadavg": load}
                           for c, lstm, comp, alloc, s, load in (
                               ("Xeon", "fused", False, "reuse", 1.34, 0.99), ("Xeon", "fused", False, "system", 2.15, 0.99),
                               ("Xeon", "fused", False, "reuse", 9.0, 3.5), ("Xeon", "unrolled", True, "reuse", 2.06, 1.0),
                               ("EPYC", "fused", False, "reuse", 0.5, 1.0))])
    rates, loads = regime_cost.rate_tables(eff, levers)
    assert rates[("lm", 8192, "bf16", "reuse")] == 1.34 and loads[("lm", 8192, "bf16", "reuse")] == 0.99
    assert rates[("lm", 8192, "bf16")] == 2.47                       # the system allocator's, unchanged
    reuse = CostRuns(workload="lm", batch=8192, updates=600, ranks=2, runs=6, precision="bf16", allocator="reuse")
    cpu_h, _, _, basis, _ = price_embedded([reuse], rates, {})
    assert cpu_h == pytest.approx(600 * 2 * 6 * 1.34 / 2 / 3600) and basis.endswith("at 1.34 s (bf16, reuse allocator)")
    with pytest.raises(CostError, match=r"lm_levers\.csv: no quiet fused-bf16-reuse row for workload 'lm' batch 4096 .*"
                                        r"lm_levers\.py --batches 4096 --variants fused-bf16-reuse\)"):
        price_embedded([reuse.model_copy(update={"batch": 4096})], rates, {})


def test_rates_from_two_cpus_are_one_line_naming_them():
    """A median over two machines' rows is neither's rate: efficiency.csv with rows of two CPUs (a partial
    rerun after the machine changed) is one line naming the file and both CPUs, never a price."""
    eff = pd.DataFrame([{"workload": "lm", "batch": 8192, "precision": "fp32", "loadavg": 1.0,
                         "codist_s_per_update": s, "cpu": c} for c, s in (("Xeon", 3.7), ("EPYC", 3.2))])
    with pytest.raises(CostError, match=r"^results/bench/efficiency\.csv: rows of 2 CPUs \(EPYC; Xeon\); .*one machine's"):
        regime_cost.rate_tables(eff)
    rates, _ = regime_cost.rate_tables(eff[eff.cpu == "Xeon"])
    assert rates == {("lm", 8192): 3.7}


def test_a_regime_of_embedded_and_full_runs_keeps_a_gpu_figure_only_as_a_lower_bound(tmp_path, monkeypatch):
    """A claim priced by embedded runs and a full-scale figure (regime_cost.rows): the GPU hours add up
    only where the embedded part is itself a lower bound (runs at or above the batch the H200 ran);
    below it, the sum bounds nothing: no GPU figure. A full figure alone is the budget's projection ('=').
    price_full is stubbed (1 CPU hour, 2 GPU hours): this pins how the two parts combine."""
    paper = tmp_path / "replications" / "toy"
    paper.mkdir(parents=True)

    def claim(cid, embedded):
        return {"id": cid, "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "a": "a",
                "b": "b", "regime_cost": {"needs": "bigger runs", "full": [{"figure": "toy/f"}],
                                          "embedded": embedded}}
    (paper / "experiments.yaml").write_text(yaml.safe_dump({
        "paper": "toy", "figures": {"f": {"title": "t", "kind": "curves", "scales": {
            "embedded": {"base": {"seed": 0}, "seeds": [0, 1, 2], "series": {"a": {}, "b": {}}}}}},
        "claims": [claim("both-above", [{"workload": "lm", "batch": 64, "updates": 100_000}]),
                   claim("both-below", [{"workload": "lm", "batch": 8, "updates": 100_000}]),
                   claim("full-only", [])]}))
    bench = toy_bench(tmp_path)
    monkeypatch.setattr(regime_cost, "PAPERS", ("toy",))
    monkeypatch.setattr(regime_cost, "_full_plan", lambda replications, bench: ("plan", "table"))
    monkeypatch.setattr(regime_cost, "price_full", lambda *a: (1.0, 2.0, "cpu basis", "gpu basis"))
    got = {r["claim"]: (r["cpu_bound"], r["cpu_h_2cores"], r["gpu_h_one"]) for r in regime_cost.rows(tmp_path / "replications", bench)}
    cpu64, cpu8, gpu = (100_000 * s / div for s, div in ((2.0, 2 * 3600), (1.0, 2 * 3600), (0.05, 3600)))
    assert got == {"both-above": (">=", round(cpu64 + 1.0, 3), round(gpu + 2.0, 3)),
                   "both-below": (">=", round(cpu8 + 1.0, 3), None),
                   "full-only": (">=", 1.0, 2.0)}
