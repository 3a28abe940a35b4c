"""Sun et al. 2016's design (issue 23): every claim runs at the K its name states, its rows show the
paper's numbers only beside runs at the paper's K, and the regime checks the issue asks for are
present, sourced, and measure what they say on the resolved run configs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
sys.path.insert(0, str(ROOT / "analysis"))

from experiments import load_plan  # noqa: E402
import regime  # noqa: E402
from schema import parse  # noqa: E402

SPEC_PATH = ROOT / "replications" / "sun2016" / "experiments.yaml"
SPEC = parse(yaml.safe_load(SPEC_PATH.read_text()), SPEC_PATH)
SEEDED = [c for c in SPEC.claims if c.measure in ("final", "speedup")]


@pytest.fixture(scope="module", params=["embedded", "full"])
def plan(request):
    return load_plan(ROOT / "replications", request.param, tier="paper")


def series_configs(plan, figure):
    fig = plan.figures[("sun2016", figure)]
    return {r.series: plan.configs[r.run_id] for r in fig.runs}


def k_of(name: str) -> int:
    return int(re.search(r"K=?(\d)", name).group(1))


def test_every_claim_runs_at_the_k_its_name_states(plan):
    for c in SPEC.claims:
        claim = c.at(plan.scale)
        if (claim.full_scale_only and plan.scale == "embedded") or ("sun2016", claim.figure) not in plan.figures:
            continue
        cfgs = series_configs(plan, claim.figure)
        k = 4 if c.id == "speed-imagenet" else k_of(c.id)
        for s in (claim.a, claim.b):
            assert k_of(s) == k and cfgs[s].parallel.models == k, (c.id, s)
            # one model per worker's group: K workers of world_size / K ranks each
            assert cfgs[s].parallel.world_size % k == 0


def test_paper_numbers_only_beside_runs_at_the_papers_k(plan):
    for (paper, fid), fig in plan.figures.items():
        if paper != "sun2016":
            continue
        for row in SPEC.figures[fid].rows or []:
            if not row.at(plan.scale):
                continue
            numbers = set(row.model_extra or {}) - {"scales"}
            if numbers:
                assert f"K={k_of(row.series)}" in row.source, (fid, row.label, row.source)
            assert "in its place" not in row.source, (fid, row.label)


def test_the_regime_checks_are_on_every_seed_based_claim():
    # issue 23's checks, as issue 41 corrected them: the plateau ratio with the plateau above chance
    wanted = ("local models at the first round >= 0.9 of their shard's plateau", "the shard's plateau above chance",
              "tau_EC / tau_MA >= 50")
    for c in SEEDED:
        for scale in ("embedded", "full"):
            claim = c.at(scale)
            names = [r.check for r in claim.regime]
            for w in wanted:
                assert any(w in n for n in names), (c.id, scale, w)
            assert all(r.source.strip() for r in claim.regime)
    plateau = {c.id for c in SEEDED if any("plateaued under a constant LR" in r.check for r in c.regime)}
    assert plateau == {c.id for c in SEEDED if c.measure == "final"}


def test_no_check_stands_on_a_ratio_or_a_batch_the_paper_does_not_give():
    """Issue 41: "locals >= 0.8 of MA-DNN's G" (the paper's own numbers bound the ratio below 0.93 and
    this stand-in's E-DNN lifts put it under 0.71-0.79 in Sun's setting), "~40 shard-epochs (the paper:
    40.96)" (a batch of 128 the paper does not give), and the ablation's conclusion as a gate."""
    for c in SPEC.claims:
        for scale in ("embedded", "full"):
            for r in c.at(scale).regime:
                assert "of MA-DNN's G" not in r.check and r.quantity != "round_epochs", (c.id, r.check)
                # a difference only within one series (issue 48's G - L premise), never EC-DNN's G against E-DNN's
                assert r.quantity != "difference" or r.b == r.series, (c.id, r.check)
    ablation = next(c for c in SPEC.claims if c.id == "ablation-EC-E-K4")
    assert (ablation.a, ablation.a_model, ablation.b, ablation.b_model) == ("EC-DNN, K=4", "G", "E-DNN, K=4", "G")


def chance_curves(e_final: float, ec_round1: float):
    """Local model 0 of E-DNN ending at `e_final` and of EC-DNN at `ec_round1` at round 1 (step 640)."""
    import pandas as pd
    rows = []
    for seed in range(3):
        for step, e, ec in ((320, e_final - 0.01, ec_round1 - 0.01), (640, e_final, ec_round1), (2560, e_final, ec_round1)):
            rows.append({"series": "E-DNN, K=4", "seed": seed, "model": "0", "step": step, "val_accuracy": e})
            rows.append({"series": "EC-DNN, K=4", "seed": seed, "model": "0", "step": step, "val_accuracy": ec})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("e_final, ec_round1, chance_passes", [
    (0.052, 0.051, False),   # 20 classes: chance 0.05; round 1 at 0.98 of a plateau at chance
    (0.108, 0.110, False),   # the ImageNet stand-in's measured plateau (issue 41): 0.06 of the way above chance
    (0.351, 0.340, True),    # just above 0.05 + 0.316 x 0.95 = 0.350
])
def test_a_plateau_at_chance_fails_the_sun_plateau_check(e_final, ec_round1, chance_passes):
    claim = next(c for c in SPEC.claims if c.id == "speed-imagenet").at("embedded")   # 20 classes
    manifest = {"panels": ["val_accuracy"], "runs": [],
                "configs": {"EC-DNN, K=4": {"algorithm": {"name": "ensemble_compress", "tau": 640}}}}
    tables = lambda fig: (manifest, chance_curves(e_final, ec_round1))   # noqa: E731
    checks = {r.check: r for r in claim.regime if r.quantity == "value"}
    plateau = regime.evaluate(checks["local models at the first round >= 0.9 of their shard's plateau"], claim, tables)
    assert plateau.state == "shown"   # the ratio alone passes at chance: what issue 41 found
    chance = next(r for name, r in checks.items() if name.startswith("the shard's plateau above chance"))
    assert chance.min == pytest.approx(0.350)
    assert regime.evaluate(chance, claim, tables).state == ("shown" if chance_passes else "refuted")


def test_the_embedded_round_matches_the_papers_and_ma_runs_a_constant_lr():
    plan = load_plan(ROOT / "replications", "embedded", tier="paper")
    # (figure, K, EC-DNN's round in shard-epochs, tau_EC / tau_MA); the full preset's round is 4,000 updates
    # of 128 (our batch: the paper gives none) on 12,500 images; CIFAR-100's is issue 37's design (49c05e9):
    # 4x longer, so its locals reach their shard's plateau at the first round
    for fid, k, round_epochs, ratio in (("cifar10_k4", 4, 4000 * 128 / 12500, 80), ("cifar10_k8", 8, 4000 * 128 / 12500, 80),
                                        ("cifar100", 4, 4 * 4000 * 128 / 12500, 320),
                                        ("imagenet_speed", 4, 4000 * 128 / 12500, 80)):
        cfgs = series_configs(plan, fid)
        ec = cfgs[f"EC-DNN, K={k}"].model_dump()
        ma = cfgs[f"MA-DNN, K={k}"].model_dump()
        q = lambda name: type("Q", (), {"quantity": name})   # noqa: E731
        assert regime.design_value(q("round_epochs"), ec) == pytest.approx(round_epochs), fid
        assert regime.design_value(q("rounds"), ec) == 4
        assert regime.design_value(q("rounds"), ma) / regime.design_value(q("rounds"), ec) == ratio, fid
        for cfg in (ec, ma):
            assert cfg["schedule"]["name"] == "constant"
        e = cfgs[f"E-DNN, K={k}"]
        # E-DNN differs from EC-DNN in compression only: its local model 0 is EC-DNN's before round 1
        assert e.algorithm.compress is False
        assert e.model_dump(exclude={"algorithm"}) == cfgs[f"EC-DNN, K={k}"].model_dump(exclude={"algorithm"})


def test_the_frontier_regime_figure_keeps_its_k2_runs():
    plan = load_plan(ROOT / "replications", "embedded")
    cfgs = series_configs(plan, "cifar10")
    assert set(cfgs) == {"MA-DNN, K=2", "EC-DNN, K=2"}
    assert SPEC.figures["cifar10"].tier == "default" and not any(
        c.figure == "cifar10" for c in SPEC.claims)
