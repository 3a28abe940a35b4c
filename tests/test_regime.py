"""analysis/regime.py and analysis/comm_identity.py: each regime quantity on hand-made curves
and configs, and the communication identities at the papers' own periods."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import comm_identity  # noqa: E402
import regime  # noqa: E402
from schema import Claim, RegimeCheck  # noqa: E402

IMG = {"workload": {"name": "imagenet", "dataset": "embedded", "train_size": 1000},
       "algorithm": {"name": "allreduce"}, "parallel": {"world_size": 1, "models": 1},
       "optimizer": {"name": "sgd", "lr": 0.1, "weight_decay": 0.01},
       "schedule": {"name": "step", "warmup_steps": 0, "milestones": [50], "gamma": 0.1},
       "train": {"steps": 100, "batch_per_rank": 64, "eval_every": 50}}
EC = {**IMG, "workload": {"name": "cifar", "dataset": "embedded", "train_size": 2000},
      "algorithm": {"name": "ensemble_compress", "tau": 250, "data": "disjoint"},
      "parallel": {"world_size": 2, "models": 2}, "train": {"steps": 1000, "batch_per_rank": 32, "eval_every": 125}}


def curves():
    rows = []
    for seed in range(3):
        for i, (acc, vl, tl) in enumerate([(0.2, 2.0, 1.9), (0.4, 1.8, 1.0), (0.5, 1.7, 0.4), (0.52, 1.7, 0.2)]):
            rows.append({"series": "s", "seed": seed, "model": "0", "step": 25 * (i + 1), "wall_s": i,
                         "val_accuracy": acc + 0.01 * seed, "val_loss": vl, "train_loss": tl})
            rows.append({"series": "t", "seed": seed, "model": "0", "step": 25 * (i + 1), "wall_s": i,
                         "val_accuracy": acc - 0.1, "val_loss": vl + 0.3, "train_loss": tl})
    return pd.DataFrame(rows)


MANIFEST = {"panels": ["val_accuracy"], "configs": {"s": IMG, "ec": EC}, "runs": []}
CLAIM = Claim.model_validate({"id": "c", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final",
                              "a": "s", "b": "t"})


def measure(**q):
    check = RegimeCheck.model_validate({"check": "c", "min": 0, **q})
    return regime.measure(check, CLAIM, None, lambda fig: (MANIFEST, curves()))


def test_curve_quantities():
    assert measure(quantity="value") == pytest.approx(0.53)                      # last evaluation, mean of seeds
    assert measure(quantity="value", step=50) == pytest.approx(0.41)
    assert measure(quantity="last_gain") == pytest.approx(0.53 - 0.51)           # 75 -> 100
    assert measure(quantity="gain_over", steps=50) == pytest.approx(0.53 - 0.41)
    assert measure(quantity="difference") == pytest.approx(0.11)                  # s - t = 0.1 + 0.01 x seed
    assert measure(quantity="train_val_gap") == pytest.approx(1.5)
    assert measure(quantity="last_gain", metric="val_loss") == pytest.approx(0.0)  # oriented: lower is better
    # t reaches 0.35 at 62.5 (interpolated), s at 43.75, 42.5, 41.25 (seeds 0-2)
    assert measure(quantity="speedup", target=0.35) == pytest.approx(sum(62.5 / x for x in (43.75, 42.5, 41.25)) / 3)


def test_config_quantities():
    assert measure(quantity="epochs") == pytest.approx(100 * 64 / 1000)
    # EC-DNN, disjoint shards of 1,000: 250 updates of 32 = 8 shard-epochs per round, 4 rounds
    assert measure(quantity="round_epochs", series="ec") == pytest.approx(8.0)
    assert measure(quantity="rounds", series="ec") == pytest.approx(4.0)
    assert measure(quantity="period_fraction", series="ec") == pytest.approx(0.25)
    assert measure(quantity="lr_wd_sum") == pytest.approx(0.1 * 0.01 * (50 + 50 * 0.1))
    with pytest.raises(regime.RegimeError, match="no exchange period"):
        measure(quantity="rounds")


def test_check_text_and_ratio_over_the_effect_size():
    tables = lambda fig: (MANIFEST, curves())   # noqa: E731
    r = RegimeCheck.model_validate({"check": "plateau", "quantity": "last_gain", "max": 0.5,
                                    "over": {"quantity": "difference", "series": "t", "b": "s"}})
    ok, text, failed = regime.check(r, CLAIM, None, tables)       # 0.02 / |-0.11| = 0.1818
    assert ok and text == "plateau: 0.1818 (<= 0.5) pass"
    ok, _, failed = regime.check(r.model_copy(update={"max": 0.1}), CLAIM, None, tables)
    assert not ok and failed == "plateau (0.1818 vs <= 0.1)"


def test_communication_identities_at_the_papers_periods():
    # P = S = 1000 bytes: Sodhani's 16-GPU all-reduce (2 x 15/16 P per update) vs codistillation
    # reading the other model every 2,500 updates (S / 2500): 4,687.5x
    cfg_ar = {"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 2, "models": 1}}
    cfg_cd = {"algorithm": {"name": "codistill", "exchange_every": 16}, "parallel": {"world_size": 2, "models": 2}}
    table = pd.DataFrame([{"series": "ar", "comm_sent_bytes_per_rank_per_update": 1000.0},
                          {"series": "cd", "between_group_sent_bytes_per_rank_per_update": 1000.0 / 16}])
    r, how = comm_identity.ratio({"a": {"algorithm": "codistill", "models": 2, "period": 2500},
                                  "b": {"algorithm": "allreduce", "ranks": 16}}, table, {"ar": cfg_ar, "cd": cfg_cd},
                                 "cd", "ar")
    assert r == pytest.approx(2 * 15 / 16 * 2500)
    # Sun: MA-DNN (ring all-reduce of the states every 16) vs EC-DNN (all-gather every 4,000)
    ma = {"algorithm": {"name": "model_average", "tau": 16}, "parallel": {"world_size": 2, "models": 2}}
    ec = {"algorithm": {"name": "ensemble_compress", "tau": 250}, "parallel": {"world_size": 2, "models": 2}}
    table = pd.DataFrame([{"series": "ma", "comm_sent_bytes_per_rank_per_update": 1000.0 / 16},
                          {"series": "ec", "comm_sent_bytes_per_rank_per_update": 1000.0 / 250}])
    for k, want in ((4, 125.0), (8, 62.5)):
        r, _ = comm_identity.ratio({"a": {"algorithm": "ensemble_compress", "models": k, "period": 4000},
                                    "b": {"algorithm": "model_average", "models": k, "period": 16}},
                                   table, {"ma": ma, "ec": ec}, "ec", "ma")
        assert r == pytest.approx(want)
