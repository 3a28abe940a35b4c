"""The regime quantities Anil et al.'s claims need (issue 23), on hand-made curves and configs:
sync SGD's critical-batch ratio (steps at b over steps at 2b), the teacher lag at every exchange
of the run (not only its last steps), the fresh-data epochs of an LM text corpus, and a margin
that is a fraction of another effect (a claim's weight2). Every expected value derived by hand."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import claims  # noqa: E402
import regime  # noqa: E402
from schema import Claim, RegimeCheck  # noqa: E402
from test_regime import measure_on  # noqa: E402

LM = {"workload": {"name": "lm", "dataset": "embedded"}, "algorithm": {"name": "allreduce"},
      "parallel": {"world_size": 1}, "optimizer": {"name": "adam", "lr": 0.003},
      "schedule": {"name": "constant"}, "train": {"steps": 400, "batch_per_rank": 32, "eval_every": 100}}
CODISTILL = {**LM, "algorithm": {"name": "codistill", "burn_in": 100, "exchange_every": 50, "data": "disjoint"},
             "parallel": {"world_size": 2, "models": 2}}
CURVES = {"sync": [3.0, 2.6, 2.4, 2.35],          # val_loss at steps 100, 200, 300, 400
          "sync, 2b": [2.7, 2.35, 2.3, 2.28],     # reaches sync's best (2.35) at step 200
          "sync, 2b slow": [2.9, 2.5, 2.35, 2.3],  # ... at step 300
          "codistill": [3.0, 2.6, 2.4, 2.35]}
CONFIGS = {"sync": LM, "sync, 2b": {**LM, "train": {**LM["train"], "batch_per_rank": 64}},
           "sync, 2b slow": {**LM, "parallel": {"world_size": 2}},   # 2 ranks x 32 = 64 a model
           "sync, 3b": {**LM, "train": {**LM["train"], "batch_per_rank": 96}},
           "codistill": CODISTILL}


def curves():
    return pd.DataFrame([{"series": s, "seed": seed, "model": "0", "step": 100 * (i + 1), "val_loss": v}
                         for s, vals in CURVES.items() for seed in range(3) for i, v in enumerate(vals)])


MANIFEST = {"panels": ["val_loss"], "configs": CONFIGS, "runs": []}
CLAIM = Claim.model_validate({"id": "c", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final",
                              "a": "codistill", "b": "sync"})


def measure(**q):
    return measure_on(MANIFEST, curves(), CLAIM, **q)


def test_critical_ratio_is_sync_steps_at_b_over_steps_at_2b():
    # sync reaches its best 2.35 at step 400; batch 64 at 200 (perfect scaling), 2 ranks x 32 at 300
    assert measure(quantity="critical_ratio", series="sync, 2b", b="sync") == pytest.approx(2.0)
    assert measure(quantity="critical_ratio", series="sync, 2b slow", b="sync") == pytest.approx(400 / 300)
    # the same numbers as a plain speedup: the ratio only adds the refusals below
    assert measure(quantity="speedup", series="sync, 2b slow", b="sync") == pytest.approx(400 / 300)


def test_critical_ratio_refuses_anything_but_sync_at_twice_the_batch():
    CURVES["sync, 3b"] = CURVES["sync, 2b"]
    try:
        with pytest.raises(regime.RegimeError, match=r"'sync, 3b' has 96 examples per update, not twice series "
                                                     r"'sync''s 32"):
            measure(quantity="critical_ratio", series="sync, 3b", b="sync")
    finally:
        del CURVES["sync, 3b"]
    with pytest.raises(regime.RegimeError, match=r"'codistill' is not sync SGD of one model"):
        measure(quantity="critical_ratio", series="codistill", b="sync")


def test_exchange_lag_is_the_worst_period_over_the_run_not_the_last_steps():
    # exchanges at 100, 150, ..., 350 (burn-in 100, k 50; the one at 400 serves no update);
    # interpolated gains over the next 50 steps: 0.2, 0.2, 0.1, 0.1, 0.025, 0.025 -> worst 0.2
    assert measure(quantity="exchange_lag", series="codistill") == pytest.approx(0.2)
    # the old check read only the last 50 steps: 0.025, 8x less
    assert measure(quantity="gain_over", series="codistill", steps=50) == pytest.approx(0.025)
    lags = regime.exchange_lags(pd.Series([3.0, 2.6, 2.4, 2.35], index=[100, 200, 300, 400]), CODISTILL, "val_loss")
    assert lags == pytest.approx([0.2, 0.2, 0.1, 0.1, 0.025, 0.025])
    late = {**CODISTILL, "algorithm": {**CODISTILL["algorithm"], "burn_in": 380}}
    with pytest.raises(regime.RegimeError, match="no full exchange period of 50 steps after burn-in in a run of 400"):
        regime.exchange_lags(pd.Series([3.0, 2.35], index=[100, 400]), late, "val_loss")
    with pytest.raises(regime.RegimeError, match="no exchange period"):
        measure(quantity="exchange_lag", series="sync")


def quantity(q, cfg):
    return regime.design_value(RegimeCheck.model_validate({"check": "c", "source": "s", "max": 1, "quantity": q}), cfg)


def test_fresh_data_epochs_of_an_lm_can_exceed_one():
    # Anil's full scale: 2 models x 128 workers x 128 segments of 32 tokens, 50,000 updates, disjoint halves of
    # 6e11 tokens: 50,000 x 16,384 segments / (6e11 / 32 / 2) = 0.0874 epochs
    full = {**CODISTILL, "workload": {"name": "lm", "dataset": "text", "data_dir": "common_crawl_wet", "seq_len": 32},
            "parallel": {"world_size": 256, "models": 2}, "train": {"steps": 50000, "batch_per_rank": 128}}
    assert quantity("epochs", full) == pytest.approx(50000 * 16384 / (6e11 / 32 / 2))
    assert quantity("epochs", full) == pytest.approx(0.08738, abs=1e-5)
    # a run 12x as long reads past its half of the corpus: the check can fail
    assert quantity("epochs", {**full, "train": {"steps": 600000, "batch_per_rank": 128}}) > 1
    # 8-token segments: 4x the examples in the corpus, 4x fewer tokens a segment: the same epochs
    short = {**full, "workload": {**full["workload"], "seq_len": 8}}
    assert quantity("epochs", short) == pytest.approx(50000 * 16384 / (6e11 / 8 / 2))
    assert quantity("epochs", LM) == 0.0                        # the embedded generator never repeats a document
    with pytest.raises(regime.RegimeError, match=r"data_dir 'my_corpus': corpus size unknown"):
        quantity("epochs", {**full, "workload": {**full["workload"], "data_dir": "my_corpus"}})


def test_a_margin_as_a_fraction_of_another_effect(tmp_path):
    # k125 ends 0.02 + 0.001 x seed above k25 (staleness costs), sync 0.06 above k25 (codistillation's gain):
    # [k125 - k25] - 0.5 x [sync - k25], oriented (lower loss is better) = -0.02 - 0.001 s + 0.5 x 0.06
    rows = [{"series": s, "seed": seed, "model": "0", "step": 100, "val_loss": v}
            for seed in range(3)
            for s, v in (("k125", 2.40 + 0.001 * seed), ("k25", 2.38), ("sync", 2.44))]
    pd.DataFrame(rows).to_csv(tmp_path / "f_curves.csv", index=False)
    base = {"id": "c", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final",
            "a": "k125", "b": "k25", "a2": "sync", "b2": "k25"}
    c = Claim.model_validate({**base, "weight2": 0.5})
    iv, d, _ = claims.effects(c, {"panels": ["val_loss"]}, tmp_path)
    assert list(d) == pytest.approx([0.01, 0.009, 0.008])
    assert iv.mean == pytest.approx(0.009)
    # weight2 1 (the default): k125 against sync, -0.02 - 0.001 s + 0.06
    iv, d, _ = claims.effects(Claim.model_validate(base), {"panels": ["val_loss"]}, tmp_path)
    assert list(d) == pytest.approx([0.04, 0.039, 0.038])


# ------------------------------------------------------------------ issue 41: which claims saturation gates
ANIL = ROOT / "replications" / "anil2018" / "experiments.yaml"


def anil_claims():
    import yaml
    from schema import parse
    return {c.id: c for c in parse(yaml.safe_load(ANIL.read_text()), ANIL).claims}


# Anil's claims that do not depend on sync SGD being saturated: Table 1's reproducibility claim (Sec. 1:
# codistillation makes 'the exact predictions of a model dramatically more reproducible', of trained
# models at any batch) and its rows beside the ensemble
NOT_SATURATION = {"table1-churn", "table1-loss", "table1-ensemble-churn", "table1-ensemble-loss"}
# the claims that do: codistillation's extra workers pay once more workers no longer help sync SGD; and
# every claim drawn from Fig. 2a inherits the figure's saturation check (issue 48: fig2a-ensemble too)
SATURATION = {"fig2a-loss", "fig2a-steps", "fig2a-ensemble", "fig4", "sec3.4.1"}


def test_a_claim_that_does_not_depend_on_saturation_is_not_gated_by_it():
    claims_ = anil_claims()
    for cid in NOT_SATURATION:
        for scale in ("embedded", "full"):
            assert not any(r.quantity == "critical_ratio" for r in claims_[cid].at(scale).regime), (cid, scale)
    for cid in SATURATION:
        assert any(r.quantity == "critical_ratio" for r in claims_[cid].regime), cid


def test_the_saturation_check_is_named_for_what_it_tests():
    # at McCandlish et al.'s B_crit a doubling still gains (1 + 1) / (1 + 1/2) = 1.33x: <= 1.1x is saturation
    for c in anil_claims().values():
        for r in c.regime:
            assert "critical batch" not in r.check, (c.id, r.check)
            if r.quantity == "critical_ratio":
                assert r.check.startswith("sync saturated") and r.max == 1.1


def test_a_saturation_gate_withholds_only_the_claims_that_carry_it(tmp_path):
    """Through the verdict: the same curves, a claim with the saturation check reads 'not in the paper's
    regime', one without it gets its verdict."""
    check = {"check": "sync saturated", "source": "Fig. 1a", "quantity": "critical_ratio", "series": "sync, 2b",
             "b": "sync", "max": 1.1}
    table = curves()
    table.to_csv(tmp_path / "f_curves.csv", index=False)
    gated = Claim.model_validate({"id": "g", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final",
                                  "a": "codistill", "b": "sync", "regime": [check]})
    free = gated.model_copy(update={"id": "n", "regime": []})
    tables = lambda fig: (MANIFEST, table)   # noqa: E731
    assert claims.judge(gated, MANIFEST, tmp_path, "embedded", tables)["verdict"].startswith("not in the paper's regime: sync saturated")
    assert not claims.judge(free, MANIFEST, tmp_path, "embedded", tables)["verdict"].startswith("not in the paper's regime")
