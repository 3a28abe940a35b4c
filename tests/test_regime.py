"""analysis/regime.py and analysis/comm_identity.py: each regime quantity on hand-made curves
and configs, the one check rule (shown / refuted / not established, design facts apart), and the
communication identities at the papers' own periods."""
from __future__ import annotations

import sys
from pathlib import Path

import math

import pandas as pd
import pytest
from scipy import stats as st

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


def measure_on(manifest, table, claim, **q):
    """One quantity `q` of `claim` on a figure whose manifest and curves are given (shared with
    test_regime_anil)."""
    check = RegimeCheck.model_validate({"check": "c", "source": "s", "min": 0, **q})
    return regime.measure(check, claim, None, lambda fig: (manifest, table))


def measure(**q):
    return measure_on(MANIFEST, curves(), CLAIM, **q)


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


def test_the_metric_defaults_to_the_figures_first_panel():
    two = {**MANIFEST, "panels": ["val_accuracy", "val_loss"]}
    assert measure_on(two, curves(), CLAIM, quantity="value") == pytest.approx(0.53)        # s's accuracy, not loss 1.7
    assert measure_on(two, curves(), CLAIM, quantity="value", metric="val_loss") == pytest.approx(1.7)


def test_config_quantities():
    assert measure(quantity="epochs") == pytest.approx(100 * 64 / 1000)
    # EC-DNN, disjoint shards of 1,000: 250 updates of 32 = 8 shard-epochs per round, 4 rounds
    assert measure(quantity="round_epochs", series="ec") == pytest.approx(8.0)
    assert measure(quantity="rounds", series="ec") == pytest.approx(4.0)
    assert measure(quantity="period_fraction", series="ec") == pytest.approx(0.25)
    assert measure(quantity="lr_wd_sum") == pytest.approx(0.1 * 0.01 * (50 + 50 * 0.1))
    with pytest.raises(regime.RegimeError, match="no exchange period"):
        measure(quantity="rounds")


def evaluate(check: dict, table=None, manifest=None):
    r = RegimeCheck.model_validate({"check": "c", "source": "s", **check})
    return regime.evaluate(r, CLAIM, lambda fig: (manifest or MANIFEST, curves() if table is None else table))


def test_a_ratio_over_a_measured_effect_is_tested_per_seed_as_a_contrast():
    # s's last-quarter gain is 0.02 on every seed; the effect t - s is -0.10, -0.11, -0.12 (seeds 0-2):
    # ratio of the means 0.02 / 0.11 = 0.1818; the contrast v - 0.5 |o| = -0.03, -0.035, -0.04
    plateau = {"check": "plateau", "quantity": "last_gain", "max": 0.5,
               "over": {"quantity": "difference", "series": "t", "b": "s"}}
    r = evaluate(plateau)
    high = -0.035 + st.t.ppf(0.95, 2) * 0.005 / 3 ** 0.5
    assert r.state == "shown" and r.value == pytest.approx(0.02 / 0.11) and r.high == pytest.approx(high)
    assert r.text().startswith("plateau: 0.1818 (per seed v - 0.5 x |o|, needs <= 0: [") and r.text().endswith("(<= 0.5): shown")
    # at max 0.1 the contrast 0.02 - 0.1 x (0.10, 0.11, 0.12) = 0.010, 0.009, 0.008 is above 0 at 95%
    assert evaluate({**plateau, "max": 0.1}).state == "refuted"


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


# ------------------------------------------------------------------ full-scale data sizes
FULL_IMG = {**IMG, "workload": {"name": "imagenet", "dataset": "imagefolder", "data_dir": "imagenet",
                                "train_size": 6000, "val_size": 1000},   # the embedded defaults a full config keeps
            "parallel": {"world_size": 16, "models": 1}, "train": {"steps": 225180, "batch_per_rank": 32}}


def quantity(q, cfg):
    return regime.design_value(RegimeCheck.model_validate({"check": "c", "source": "s", "min": 0, "quantity": q}), cfg)


def test_full_scale_epochs_use_the_real_data_set_sizes():
    # Sodhani's all-reduce: 225,180 updates of 16 x 32 over ImageNet's 1,281,167 images = 89.99 epochs
    # (the embedded default train_size 6,000 gave 19,215)
    assert quantity("epochs", FULL_IMG) == pytest.approx(225180 * 512 / 1_281_167)
    assert quantity("epochs", FULL_IMG) == pytest.approx(89.99, abs=0.01)
    # Sun's ImageNet EC-DNN: K = 4 models of 8 ranks x 32, disjoint quarters, tau 4,000: 3.197 shard-epochs
    sun = {**FULL_IMG, "algorithm": {"name": "ensemble_compress", "tau": 4000, "data": "disjoint"},
           "parallel": {"world_size": 32, "models": 4}}
    assert quantity("round_epochs", sun) == pytest.approx(4000 * 256 / (1_281_167 / 4))
    # CIFAR-10, K = 4 of 128, disjoint shards of 12,500: 40.96 shard-epochs per round of 4,000
    cifar = {**sun, "workload": {"name": "cifar", "dataset": "cifar10", "data_dir": "cifar", "train_size": 4000},
             "parallel": {"world_size": 4, "models": 4}, "train": {"steps": 64000, "batch_per_rank": 128}}
    assert quantity("round_epochs", cifar) == pytest.approx(40.96)
    # Sodhani Fig. 6's quarter of ImageNet: 4x the epochs of the same updates
    quarter = {**FULL_IMG, "workload": {**FULL_IMG["workload"], "data_dir": "imagenet_quarter"}}
    assert quantity("epochs", quarter) == pytest.approx(4 * 225180 * 512 / 1_281_167)
    # Criteo: 8 ranks x 128 x 40,000 over 90% of 45,840,617 lines
    ctr = {**IMG, "workload": {"name": "ctr", "dataset": "criteo", "data_dir": "criteo", "val_fraction": 0.1},
           "parallel": {"world_size": 8, "models": 1}, "train": {"steps": 40000, "batch_per_rank": 128}}
    assert quantity("epochs", ctr) == pytest.approx(40000 * 1024 / (45_840_617 * 0.9))
    assert regime.data_sizes(FULL_IMG["workload"]) == (1_281_167, 50_000)
    assert regime.data_sizes({"name": "cifar", "dataset": "cifar100", "data_dir": "c"}) == (50_000, 10_000)
    # Fashion-MNIST: the caps its config always carries (a class-balanced subset, or the whole split)
    assert regime.data_sizes({"name": "cifar", "dataset": "fashion_mnist", "train_size": 12000, "val_size": 10000}) \
        == (12000, 10000)
    with pytest.raises(regime.RegimeError, match=r"workload 'imagenet', dataset 'imagefolder', data_dir 'imagenet_tenth'"):
        quantity("epochs", {**FULL_IMG, "workload": {**FULL_IMG["workload"], "data_dir": "imagenet_tenth"}})


def test_value_at_the_end_of_an_exchange_round():
    # s's period: tau 50 -> round 1 ends at step 50 (mean accuracy 0.41), round 2 at 100 (0.53)
    MANIFEST["configs"]["s"] = {**IMG, "algorithm": {"name": "model_average", "tau": 50}}
    try:
        assert measure(quantity="value", round=1) == pytest.approx(0.41)
        assert measure(quantity="value", round=2) == pytest.approx(0.53)
    finally:
        MANIFEST["configs"]["s"] = IMG
    with pytest.raises(ValueError, match="step and round exclude each other"):
        measure(quantity="value", round=1, step=50)


def test_the_regime_gate_counts_a_censored_seed_at_its_bound():
    # t (accuracy - 0.1) never reaches 0.5 in its 100 steps; s reaches it at 75, 72.5, 70 (seeds 0-2):
    # the censored ratios are bounded by 75/100, 72.5/100, 70/100: mean 0.725, sd 0.025
    half = st.t.ppf(0.95, 2) * 0.025 / 3 ** 0.5   # 0.0421
    speed = {"check": "speed", "quantity": "speedup", "series": "t", "b": "s", "target": 0.5}
    assert evaluate({**speed, "min": 0.725 - half - 1e-9}).state == "shown"
    assert evaluate({**speed, "min": 0.725 + half + 1e-9}).state == "refuted"
    assert evaluate({**speed, "min": 0.72}).state == "not established"      # the old mean-only rule passed it
    assert evaluate({**speed, "max": 0.725 + half + 1e-9}).state == "shown"


def test_check_bounds_are_inclusive_and_a_design_fact_is_exact():
    # s at step 50: 0.40, 0.41, 0.42 over seeds 0-2: mean 0.41, sd 0.01
    low = 0.41 - st.t.ppf(0.95, 2) * 0.01 / 3 ** 0.5
    r = evaluate({"check": "v", "quantity": "value", "step": 50, "min": low - 1e-12})
    assert r.state == "shown" and r.low == pytest.approx(low) and not r.design
    assert evaluate({"check": "v", "quantity": "value", "step": 50, "min": low + 1e-6}).state == "not established"
    # ec's 4 rounds are read from its config: a design fact, inside its bound or refuted, never "shown"
    rounds = {"check": "rounds", "quantity": "rounds", "series": "ec"}
    r = evaluate({**rounds, "min": 4})
    assert (r.state, r.design, r.value, r.n) == ("design", True, 4.0, 0)
    assert r.text() == "rounds: 4 (>= 4): design"
    assert evaluate({**rounds, "min": 4.0001}).state == "refuted"


# ------------------------------------------------------------------ a claim at another scale
def test_a_claim_with_a_scale_override_keeps_its_checks_renamed():
    plateau = {"check": "b plateaued", "source": "Fig. 4", "quantity": "last_gain", "series": "k25", "max": 0.02}
    c = Claim.model_validate({
        "id": "c", "claim": "x", "figure": "f", "basis": "step-matched", "measure": "final", "a": "k125", "b": "k25",
        "scales": {"full": {"a": "k250", "b": "k50"}},
        "regime": [plateau,
                   {"check": "rounds", "source": "s", "quantity": "rounds", "series": "k125", "min": 8},
                   {"check": "sync", "source": "s", "quantity": "epochs", "series": "sync", "max": 1},
                   {"check": "lag", "source": "s", "quantity": "gain_over", "series": "k25", "steps": 25, "max": 0.5,
                    "over": {"quantity": "difference", "series": "k125", "b": "k25"}},
                   {"check": "other figure", "source": "s", "quantity": "value", "series": "k25", "figure": "g",
                    "min": 0}]})
    full = c.at("full")
    assert (full.a, full.b) == ("k250", "k50")
    assert [r.series for r in full.regime] == ["k50", "k250", "sync", "k50", "k25"]   # figure g keeps its names
    assert (full.regime[3].over.series, full.regime[3].over.b) == ("k250", "k50")
    assert [r.source for r in full.regime] == [r.source for r in c.regime]
    assert c.at("embedded") is c
    own = Claim.model_validate({**c.model_dump(), "scales": {"full": {"a": "k250", "regime": []}}})
    assert own.at("full").regime == []                                                 # the scale's own checks


# ------------------------------------------------------------------ issue 48: a regime is shown, never assumed
def gain_curves(gains):
    """Series 'm', one seed per gain: 0.5 at step 75 (the last quarter's start of a 100-step run), 0.5 + gain at 100."""
    return pd.DataFrame([{"series": "m", "seed": seed, "model": "0", "step": step, "val_accuracy": v}
                         for seed, g in enumerate(gains) for step, v in ((50, 0.4), (75, 0.5), (100, 0.5 + g))])


def plateau(gains, **kw):
    return evaluate({"check": "m has plateaued", "quantity": "last_gain", "series": "m", "max": 0.01, **kw},
                    gain_curves(gains))


def test_a_mean_on_the_wrong_side_with_a_straddling_bound_is_not_established():
    sun = [0.020, -0.002, 0.016]   # Sun's MA-DNN, CIFAR-10 K = 4: per-seed last-quarter gains (issue 41)
    # by hand: mean 0.011333, sd 0.011719: low -0.008423, high 0.031090, straddling 0.01 with the mean above it
    mean = sum(sun) / 3
    sd = (sum((g - mean) ** 2 for g in sun) / 2) ** 0.5
    half = st.t.ppf(0.95, 2) * sd / 3 ** 0.5
    r = plateau(sun)
    assert r.state == "not established"                  # issue 41's noise rule passed it
    assert (r.low, r.high) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert r.low == pytest.approx(-0.008423, abs=1e-6)
    # the seeds that would settle it at this mean and sd: the least n with t(0.95, n-1) sd / sqrt(n) < 0.00133
    n = next(m for m in range(3, 1000) if st.t.ppf(0.95, m - 1) * sd / m ** 0.5 < mean - 0.01)
    assert f"about {n - 3} more seeds would settle it" in r.settle and r.settle in r.reason()
    assert plateau([0.030, 0.031, 0.029]).state == "refuted"       # low = 0.030 - 2.92 x 0.000577 > 0.01
    assert plateau([0.001, 0.002, 0.0015]).state == "shown"        # high < 0.01
    assert plateau([0.02]).state == "not established"              # one seed: no bound
    assert plateau(sun, max=None, min=-0.01).state == "shown"      # low -0.0084 >= -0.01
    assert plateau(sun, max=None, min=0.04).state == "refuted"     # high 0.0311 < 0.04


def test_a_ratio_of_two_measured_values_is_a_contrast_per_seed():
    """Sun's plateau ratio at K = 4 (per seed 0.86, 0.859, 1.003 of the plateau 0.5): the contrast
    v - 0.9 p per seed, mean 0.5 x (0.9073 - 0.9), straddles 0: not established (the noise rule passed it)."""
    ratios = [0.86, 0.859, 1.003]
    table = pd.DataFrame([{"series": s, "seed": seed, "model": "0", "step": 100, "val_accuracy": v}
                          for seed, r in enumerate(ratios) for s, v in (("m", 0.5 * r), ("p", 0.5))])
    near = {"check": "near the plateau", "quantity": "value", "series": "m", "min": 0.9,
            "over": {"quantity": "value", "series": "p"}}
    r = evaluate(near, table)
    c = [0.5 * (x - 0.9) for x in ratios]
    mean = sum(c) / 3
    sd = (sum((x - mean) ** 2 for x in c) / 2) ** 0.5
    assert r.state == "not established" and r.value == pytest.approx(sum(ratios) / 3)
    assert r.low == pytest.approx(mean - st.t.ppf(0.95, 2) * sd / 3 ** 0.5)
    assert evaluate({**near, "min": 0.5}, table).state == "shown"
    assert evaluate({**near, "min": 1.2}, table).state == "refuted"


def test_the_noise_key_is_gone():
    with pytest.raises(ValueError, match="noise"):
        RegimeCheck.model_validate({"check": "c", "source": "s", "quantity": "last_gain", "max": 1, "noise": True})


def test_every_quantity_is_registered_once_with_its_doc():
    from schema import QUANTITIES
    assert set(regime.QUANTITIES) == set(QUANTITIES)
    assert all(q.doc for q in regime.QUANTITIES.values())
    assert {n for n, q in regime.QUANTITIES.items() if q.design} == {
        "epochs", "round_epochs", "rounds", "period_fraction", "lr_wd_sum", "label_noise_floor"}


def test_the_label_noise_floor_is_the_noisy_labels_entropy():
    # Sodhani's 12,000-image stand-in: 10% of labels moved to one of the 19 other classes
    cfg = {"workload": {"name": "imagenet", "dataset": "embedded", "label_noise": 0.1, "classes": 20}}
    floor = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1 / 19))
    assert quantity("label_noise_floor", cfg) == pytest.approx(floor) and floor == pytest.approx(0.6195, abs=1e-4)
    assert quantity("label_noise_floor", {"workload": {**cfg["workload"], "label_noise": 0.0}}) == 0.0
    assert quantity("label_noise_floor", {"workload": {"name": "cifar", "dataset": "cifar10"}}) == 0.0
    with pytest.raises(regime.RegimeError, match="no label_noise / classes"):
        quantity("label_noise_floor", {"workload": {"name": "imagenet", "dataset": "embedded"}})


def test_a_check_reads_its_own_figure_series_and_b_else_the_claims():
    """Issue 52, mutant R07 (regime.where: `q.figure or claim.figure`, `q.series or claim.a`, `q.b or
    claim.b`): a check that names a figure, series or b reads those, one that names none reads the
    claim's. Figure g has its own series s (0.9 on every seed) and u, whose model is g's manifest's
    "ens" (0.6 + 0.01 x seed; its model "0" is at 0.3); the claim's figure f has s at 0.53 on average
    and no u."""
    rows = []
    for seed in range(3):
        for i in range(4):
            for series, model, acc in (("s", "0", 0.9), ("u", "ens", 0.6 + 0.01 * seed), ("u", "0", 0.3)):
                rows.append({"series": series, "seed": seed, "model": model, "step": 25 * (i + 1), "wall_s": i,
                             "val_accuracy": acc, "val_loss": 1.0, "train_loss": 1.0})
    figures = {"f": (MANIFEST, curves()), "g": ({"panels": ["val_accuracy"], "models": {"u": "ens"}, "runs": []},
                                                pd.DataFrame(rows))}

    def value(**q):
        check = RegimeCheck.model_validate({"check": "c", "source": "s", "min": 0, **q})
        return regime.measure(check, CLAIM, None, figures.__getitem__)

    assert value(quantity="value") == pytest.approx(0.53)                         # the claim's figure f, series s
    assert value(quantity="value", figure="g") == pytest.approx(0.9)              # g's s, not f's
    assert value(quantity="value", figure="g", series="u") == pytest.approx(0.61)  # u's model "ens", g's manifest
    assert value(quantity="value", figure="g", series="u", model="0") == pytest.approx(0.3)
    # the check's own b (g has no t, the claim's b): u - s = 0.61 - 0.9, higher accuracy is better
    assert value(quantity="difference", figure="g", series="u", b="s") == pytest.approx(0.61 - 0.9)
    assert value(quantity="difference", series="t", b="s") == pytest.approx(-0.11)  # f's t - s


def _least_seeds(n, mean, sd, upto):
    """By hand: the least m >= max(n, 2) with t(0.95, m-1) sd / sqrt(m) < |mean|, or None up to `upto`."""
    return next((m for m in range(max(n, 2), upto + 1) if st.t.ppf(0.95, m - 1) * sd / m ** 0.5 < abs(mean)), None)


def test_seeds_to_settle_is_the_least_count_whose_bound_clears_zero_up_to_its_search_bound():
    assert regime.MAX_SEEDS_ASKED == 1000
    for n, mean, sd in ((3, 0.01, 0.02), (6, -0.004, 0.01), (1, 1.0, 0.5), (1, -1.0, 0.5), (2, 0.3, 0.01)):
        assert regime.seeds_to_settle(n, mean, sd) == _least_seeds(n, mean, sd, 1000), (n, mean, sd)
    assert regime.seeds_to_settle(1, 5.0, 0.1) == 2           # one seed: the count starts at two, not three
    assert regime.seeds_to_settle(12, 5.0, 0.1) == 12         # already settled by its own count
    # at the search bound: a mean that 1,000 seeds settle and 999 do not, and one that needs 1,001
    bound = {m: st.t.ppf(0.95, m - 1) * 0.01 / m ** 0.5 for m in (999, 1000, 1001)}
    assert regime.seeds_to_settle(3, (bound[999] + bound[1000]) / 2, 0.01) == 1000
    assert regime.seeds_to_settle(3, (bound[1000] + bound[1001]) / 2, 0.01) is None
    # no spread, a mean on the bound, no mean: never
    assert regime.seeds_to_settle(3, 0.01, 0.0) is None and regime.seeds_to_settle(3, 0.0, 0.01) is None
    assert regime.seeds_to_settle(3, float("nan"), 0.01) is None


@pytest.mark.parametrize("gains, text", [
    ([0.02], "a single seed has no bound"),
    ([0.01 + 1e-6, 0.01 - 1e-4, 0.01 + 1e-4], "more than 1,000 seeds would settle it at the measured sd"),
])
def test_each_unsettled_check_says_why_no_count_of_seeds_is_given(gains, text):
    r = plateau(gains)
    assert r.state == "not established" and r.settle.startswith(text), r.settle


def test_a_check_with_both_bounds_says_what_settles_the_unsettled_side():
    """min 0 and max 0.01: the min side is shown (every gain above 0), the max side straddles 0.01."""
    sun = [0.020, -0.002, 0.016]
    r = plateau([g + 0.004 for g in sun], min=-0.5)
    assert r.state == "not established" and r.settle.startswith("about ") and "more seeds would settle it" in r.settle


def test_a_mean_exactly_on_the_bound_is_settled_by_no_count_of_seeds():
    """Final values 0.25 and 0.75 against max 0.5: the contrast's mean is exactly 0 with a spread."""
    r = evaluate({"check": "m ends at most 0.5", "quantity": "value", "series": "m", "metric": "val_accuracy",
                  "max": 0.5}, gain_curves([-0.25, 0.25]))
    assert r.state == "not established"
    assert r.settle == "no number of seeds would settle it: the mean sits on the bound"


def test_a_bound_exactly_on_the_threshold_counts_and_a_missing_bound_settles_nothing():
    """The one-sided bound may touch the threshold (>= 0 for a min, <= 0 for a max); a NaN on either side of
    the interval settles nothing. A design fact exactly on a bound is inside it."""
    assert regime._state(0.0, 0.5, "min") == "shown" and regime._state(-0.5, 0.0, "min") == "not established"
    assert regime._state(-0.5, 0.0, "max") == "shown" and regime._state(0.0, 0.5, "max") == "not established"
    assert regime._state(-0.5, -0.1, "min") == "refuted" and regime._state(0.1, 0.5, "max") == "refuted"
    for low, high in ((math.nan, 0.5), (0.1, math.nan)):
        assert regime._state(low, high, "min") == regime._state(low, high, "max") == "not established"
    fact = RegimeCheck(check="epochs", quantity="epochs", series="m", min=45.0, max=90.0, source="a test")
    assert regime._inside(fact, 45.0) and regime._inside(fact, 90.0)
    assert not regime._inside(fact, 90.001) and not regime._inside(fact, math.nan)


def test_the_registry_rejects_what_it_cannot_read():
    """label_noise_floor needs both label_noise and classes (a resolved config has both: one alone is an
    error, not a KeyError later); design_value refuses a measured quantity by name; the registry's and
    the results' records are immutable, and each quantity documents itself."""
    import dataclasses
    for w in ({"name": "imagenet", "label_noise": 0.1}, {"name": "imagenet", "classes": 20}):
        with pytest.raises(regime.RegimeError, match="has no label_noise / classes"):
            regime.label_noise_floor({"workload": w})
    q = RegimeCheck(check="m", quantity="last_gain", series="m", max=0.01, source="a test")
    with pytest.raises(regime.RegimeError, match="'last_gain' is not a design quantity; have .*'epochs'"):
        regime.design_value(q, {})
    quantity = regime.QUANTITIES["epochs"]
    assert quantity.doc and quantity.doc == __import__("inspect").getdoc(quantity.fn)
    r = plateau([0.001, 0.002, 0.0015])
    for record, field in ((quantity, "design"), (r, "state")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)
