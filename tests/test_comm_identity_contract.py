"""analysis/comm_identity.py's arithmetic and refusals (issue 29), each value worked out by hand from
the closed forms its docstring lists and the algorithms' registrations (codist.algorithms.registry):
all-reduce 2(p-1)/p, codistill n-1, MA-DNN 2(K-1)/K, EC-DNN K-1; defaults of 1 rank, 1 model, period 1."""
import pandas as pd
import pytest

from analysis import comm_identity
from analysis.comm_identity import IdentityError

WITH_FORM = "allreduce, codistill, ensemble_compress, model_average"   # registered with a factor


def test_each_algorithm_is_measured_by_its_registered_column():
    assert comm_identity.column("codistill") == "between_group_sent_bytes_per_rank_per_update"
    assert comm_identity.column("model_average") == "comm_sent_bytes_per_rank_per_update"


def test_algorithms_without_a_closed_form_or_unknown_are_refused_in_one_line():
    assert comm_identity.with_closed_form() == WITH_FORM.split(", ")
    for alg in ("diloco", "powersgd", "ensemble"):   # a form without a factor; no form at all
        with pytest.raises(IdentityError) as e:
            comm_identity.factor(alg)
        assert str(e.value) == (f"identity: algorithm {alg!r} registers no closed form of its bytes (comm=CommForm(..., "
                                f"factor=...)); algorithms with one: {WITH_FORM}")
    with pytest.raises(IdentityError) as e:
        comm_identity.column("gossip")
    # the registry's own line (KeyError's message, not its repr)
    assert str(e.value) == "identity: algorithm 'gossip' is not registered (a plugin's module must be in CODIST_PLUGINS)"


def test_factors_and_their_defaults():
    assert comm_identity.factor("allreduce") == 0                      # one rank: 2 x 0 / 1
    assert comm_identity.factor("allreduce", ranks=4) == 1.5           # 2 x 3 / 4
    assert comm_identity.factor("codistill") == 0                      # one model: n - 1 = 0
    assert comm_identity.factor("codistill", models=3) == 2
    assert comm_identity.factor("model_average", models=4) == 1.5      # 2 x 3 / 4
    assert comm_identity.factor("ensemble_compress", ranks=5, models=4) == 3


def test_unit_bytes_from_a_runs_measured_bytes():
    # all-reduce on 8 ranks (models defaults to 1): 1.75 P per update, so P = 700 / 1.75 = 400
    assert comm_identity.unit_bytes({"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 8}}, 700.0) == 400
    # MA-DNN, 4 models of 2 ranks, tau 16: 1.5 S every 16 updates, so S = 30 x 16 / 1.5 = 320
    ma = {"algorithm": {"name": "model_average", "tau": 16}, "parallel": {"world_size": 8, "models": 4}}
    assert comm_identity.unit_bytes(ma, 30.0) == 320
    # codistill, 3 models, k = 10: 2 S every 10 updates, so S = 7 x 10 / 2 = 35
    cd = {"algorithm": {"name": "codistill", "exchange_every": 10}, "parallel": {"world_size": 3, "models": 3}}
    assert comm_identity.unit_bytes(cd, 7.0) == 35
    with pytest.raises(IdentityError) as e:
        comm_identity.unit_bytes({"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 1}}, 5.0)
    assert str(e.value) == "allreduce at world 1 sends nothing: cannot infer its message size"
    with pytest.raises(IdentityError, match="model_average at world 2 sends nothing"):   # models defaults to 1
        comm_identity.unit_bytes({"algorithm": {"name": "model_average", "tau": 4}, "parallel": {"world_size": 2}}, 5.0)


def test_bytes_at_the_papers_setting_and_their_defaults():
    assert comm_identity.at_paper({"algorithm": "allreduce", "ranks": 16}, 1000) == 1875   # 2 x 15/16, period 1
    assert comm_identity.at_paper({"algorithm": "model_average", "models": 8, "period": 16}, 1600) == 1.75 * 100
    assert comm_identity.at_paper({"algorithm": "codistill", "period": 5}, 1000) == 0       # one model by default
    assert comm_identity.at_paper({"algorithm": "allreduce"}, 1000) == 0                    # one rank by default
    assert comm_identity.at_paper({"algorithm": "ensemble_compress", "models": "3", "period": "4"}, 100) == 50


def test_ratio_names_its_computation_and_refuses_a_series_of_another_algorithm():
    configs = {"ar": {"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 4, "models": 1}},
               "ma": {"algorithm": {"name": "model_average", "tau": 2}, "parallel": {"world_size": 2, "models": 2}}}
    # ar: 1.5 P = 600 B per update, P = 400; ma: 1 S every 2 updates = 50 B per update, S = 100
    table = pd.DataFrame([{"series": "ar", "comm_sent_bytes_per_rank_per_update": 600.0},
                          {"series": "ma", "comm_sent_bytes_per_rank_per_update": 50.0}])
    identity = {"a": {"algorithm": "model_average", "models": 4, "period": 10}, "b": {"algorithm": "allreduce", "ranks": 8}}
    r, how = comm_identity.ratio(identity, table, configs, "ma", "ar")
    # a: 1.5 x 100 / 10 = 15 B per rank-update; b: 1.75 x 400 = 700
    assert r == pytest.approx(700 / 15)
    assert how == (f"identity at {identity['b']} vs {identity['a']}: 700 / 15 B per rank-update "
                   f"(measured message 400 / 100 B)")
    with pytest.raises(IdentityError) as e:
        comm_identity.ratio(identity, table, configs, "ar", "ma")
    assert str(e.value) == "identity.a: algorithm 'model_average' but series 'ar' runs 'allreduce'"
    with pytest.raises(IdentityError) as e:
        comm_identity.ratio({"a": identity["a"], "b": {"algorithm": "codistill"}}, table, configs, "ma", "ar")
    assert str(e.value) == "identity.b: algorithm 'codistill' but series 'ar' runs 'allreduce'"
