"""analysis/schema.py as an experiments.yaml author meets it (issue 52: the mutants of schema.py that
a cosmic-ray run left alive). Each bad value is one exact line naming the file, the figure or claim
and the key; each value the schema must accept (a model written as a YAML number, an offset naming a
one-letter series, one run or batch 1 of a regime's cost) parses; and `check_references` reports every
broken name of a table row, an offset and a regime check, each once, with nothing else. The existing
tests matched these messages only in part, or not at all, so a bound moved by one, a validator
dropped or a loop never entered went unseen. Schema and reference checks only: no plan, nothing trains."""
from __future__ import annotations

import copy

import pytest
import yaml

from analysis.schema import SpecError, check_references, parse
from test_claims import c_, spec_doc

PATH = "toy/experiments.yaml"
HAVE = {"f": {"a": ["0"], "b": ["0", "1"]}}   # series_models: the figure's series -> the models its runs evaluate
LOGGED = {"f": {"val_loss"}}


def problem(doc) -> str:
    """The message parse gives for a bad document (SpecError: one line per bad key)."""
    with pytest.raises(SpecError) as e:
        parse(doc, PATH)
    return str(e.value)


def with_figure(change: dict, *claims) -> dict:
    doc = spec_doc(*claims)
    doc["figures"]["f"].update(change)
    return doc


def with_scale(change: dict) -> dict:
    doc = spec_doc()
    doc["figures"]["f"]["scales"]["embedded"].update(change)
    return doc


def check(**kw) -> dict:
    """A regime check of claim c1 (figure f: series a, b), with `kw` in place of its defaults."""
    return {"check": "k", "source": "a test", "quantity": "value", "series": "a", "min": 0.0, **kw}


@pytest.mark.parametrize("doc, line", [
    # a negative seed (the seeds validator), found under the figure, its scale and the key
    (with_scale({"seeds": [0, -1]}),
     "figure 'f', scales.embedded.seeds: seeds must be integers >= 0 (got [0, -1])"),
    # a scale with neither base nor preset: a rule across keys, said without pydantic's prefix and the whole mapping
    (with_scale({"base": {}}),
     "figure 'f', scales.embedded: needs a base (run config mapping) or a preset (file), or both"),
    # an offset string must be '@' and a series name: neither a bare '@' nor a series without the '@'
    (with_figure({"offsets": {"b": "@"}}),
     "figure 'f', offsets: 'b': a number of steps or '@<series>' (that series' train.steps)"),
    (with_figure({"offsets": {"b": "teacher"}}),
     "figure 'f', offsets: 'b': a number of steps or '@<series>' (that series' train.steps)"),
    # a regime value's exchange round counts from 1
    (spec_doc(c_(regime=[check(round=0)])),
     "claim 'c1' (claims.0), regime.0.round: Input should be greater than or equal to 1 (got 0)"),
    # a regime's cost: no batch of 0, no 0 runs
    (spec_doc(c_(regime_cost={"needs": "n", "embedded": [{"workload": "lm", "batch": 0, "updates": 10}]})),
     "claim 'c1' (claims.0), regime_cost.embedded.0.batch: Input should be greater than 0 (got 0)"),
    (spec_doc(c_(regime_cost={"needs": "n", "embedded": [{"workload": "lm", "batch": 8, "updates": 10, "runs": 0}]})),
     "claim 'c1' (claims.0), regime_cost.embedded.0.runs: Input should be greater than 0 (got 0)"),
    # a scale's override is validated when the file is read, not first when the claim is read at that scale
    (spec_doc(c_(scales={"full": {"a": 5}})),
     "claim 'c1' (claims.0): scales.full.a: Input should be a valid string"),
    # a speedup claim's b_offset: its key once, and what was given
    (spec_doc(c_(measure="speedup", b_offset="teacher")),
     "claim 'c1' (claims.0), b_offset: a number of steps or '@<series>' (that series' train.steps) (got 'teacher')"),
    # a rule across a scale override's keys: the override named without a stray '.'
    (spec_doc(c_(scales={"full": {"a2": "a"}})),
     "claim 'c1' (claims.0): scales.full: a2 and b2 go together"),
    # a claim that is not a mapping: its position, not a figure's
    ({**spec_doc(), "claims": ["c1"]},
     "claims.0: Input should be a valid dictionary or instance of Claim (got 'c1')"),
    # YAML's !!set where a list belongs: the set cannot be indexed to find the claim's id, so the plain location
    (yaml.safe_load("paper: toy\nfigures: {}\nclaims: !!set {c1}\n"),
     "claims.0: Input should be a valid dictionary or instance of Claim (got 'c1')"),
    # the survivors of the full run at 2cb39e9: an empty list or mapping where one item is the least
    (with_scale({"seeds": []}),
     "figure 'f', scales.embedded.seeds: List should have at least 1 item after validation, not 0 (got [])"),
    (with_scale({"series": {}}),
     "figure 'f', scales.embedded.series: Dictionary should have at least 1 item after validation, not 0 (got {})"),
    (with_figure({"scales": {}}),
     "figure 'f', scales: Dictionary should have at least 1 item after validation, not 0 (got {})"),
    (spec_doc(c_(regime=[check(source="")])),
     "claim 'c1' (claims.0), regime.0.source: String should have at least 1 character (got '')"),
    (spec_doc(c_(regime_cost={"needs": "", "full": [{"figure": "f"}]})),
     "claim 'c1' (claims.0), regime_cost.needs: String should have at least 1 character (got '')"),
    # a bound: a check needs one; a regime's cost needs runs to price, each of at least one update, `times` > 0
    (spec_doc(c_(regime=[{k: v for k, v in check().items() if k != "min"}])),
     "claim 'c1' (claims.0), regime.0: regime check 'k': needs min, max or both"),
    (spec_doc(c_(regime_cost={"needs": "n"})),
     "claim 'c1' (claims.0), regime_cost: `embedded` runs or `full` figures to price"),
    (spec_doc(c_(regime_cost={"needs": "n", "embedded": [{"workload": "lm", "batch": 8, "updates": 0}]})),
     "claim 'c1' (claims.0), regime_cost.embedded.0.updates: Input should be greater than 0 (got 0)"),
    (spec_doc(c_(regime_cost={"needs": "n", "full": [{"figure": "f", "times": 0}]})),
     "claim 'c1' (claims.0), regime_cost.full.0.times: Input should be greater than 0 (got 0)"),
    # a missing key of a regime check that is not its source: the plain 'missing' line, not the source's
    (spec_doc(c_(regime=[{k: v for k, v in check().items() if k != "check"}])),
     "claim 'c1' (claims.0), regime.0.check: missing (a required key: 'check')"),
    # the first look's seed count is the one quoted, not a later look's
    (spec_doc(c_(sequential={"looks": [2, 5]})),
     "claim 'c1' (claims.0), sequential.looks: every look needs at least 3 seeds (fewer cannot decide); the first "
     "is 2 (got [2, 5])"),
    # a claim's b_offset of '@' alone names no series
    (spec_doc(c_(measure="speedup", b_offset="@")),
     "claim 'c1' (claims.0), b_offset: a number of steps or '@<series>' (that series' train.steps) (got '@')"),
    # a figure that is not a mapping: its name, and no key after it
    ({**spec_doc(), "figures": {"f": 5}},
     "figure 'f': Input should be a valid dictionary or instance of Figure (got 5)"),
], ids=["negative-seed", "no-base", "bare-at-offset", "offset-without-at", "round-0", "batch-0", "runs-0",
        "scale-override", "b-offset", "scale-override-across-keys", "claim-not-a-mapping", "claims-a-yaml-set",
        "no-seeds", "no-series", "no-scales", "empty-source", "empty-needs", "no-bound", "nothing-to-price",
        "updates-0", "times-0", "missing-check", "first-look", "bare-at-b-offset", "figure-not-a-mapping"])
def test_a_bad_value_is_one_line_naming_the_file_the_figure_or_claim_and_the_key(doc, line):
    assert problem(doc) == f"{PATH}: {line}"


def test_a_misspelt_key_is_named_under_its_figure():
    assert problem(with_figure({"titel": "t"})) == f"{PATH}: figure 'f', titel: unknown key (misspelt?)"


def test_the_values_at_the_edge_of_each_rule_are_accepted_as_written():
    """A model as YAML writes a bare number is the model's name; an offset naming a one-letter series;
    one run of batch 1 priced."""
    over = {"quantity": "difference", "series": "a", "model": 1, "b": "b", "b_model": 0}
    regime = [check(quantity="difference", model=1, b="b", b_model=0, over=over)]
    cost = {"needs": "n", "embedded": [{"workload": "lm", "batch": 1, "updates": 10, "runs": 1}]}
    doc = with_figure({"offsets": {"b": "@a"}}, c_(measure="speedup", b_offset="@a", regime=regime, regime_cost=cost))
    spec = parse(yaml.safe_load(yaml.safe_dump(doc)), PATH)
    r = spec.claims[0].regime[0]
    assert (r.model, r.b_model, r.over.model, r.over.b_model) == ("1", "0", "1", "0")
    assert spec.figures["f"].offsets == {"b": "@a"} and spec.claims[0].b_offset == "@a"
    runs = spec.claims[0].regime_cost.embedded[0]
    assert (runs.batch, runs.runs) == (1, 1)
    assert check_references(spec, PATH, "embedded", HAVE, LOGGED) == []


def test_a_table_row_key_that_is_not_a_column_is_named():
    rows = [{"label": "A", "series": "a", "top1": 70.1}, {"label": "B", "series": "b", "model": 1, "top5": 90.0}]
    spec = parse(with_figure({"kind": "table", "columns": ["top1"], "rows": rows}), PATH)
    assert check_references(spec, PATH, "embedded", HAVE, LOGGED) == [
        f"{PATH}: figure 'f', rows[1] ('B'): key(s) ['top5'] are not columns ['top1']"]


def test_an_offset_naming_a_missing_series_is_named_only_for_a_series_run_at_the_scale():
    # 'b' runs at this scale, its '@c' names no series; 'z' is another scale's series: not checked here
    spec = parse(with_figure({"offsets": {"b": "@c", "z": "@y", "a": "@b"}}), PATH)
    assert check_references(spec, PATH, "embedded", HAVE, LOGGED) == [
        f"{PATH}: figure 'f', offsets: 'b' -> '@c': series 'c' does not exist; have ['a', 'b']"]


def test_every_broken_name_of_a_regime_check_and_its_over_is_one_line():
    """Each check and its `over` are checked, the over also where the check itself names a figure the
    scale does not declare (a missing figure, or one declared only at another scale)."""
    doc = spec_doc(c_(regime=[
        check(check="k0", figure="g", over={"quantity": "value", "series": "zz"}),
        check(check="k1", figure="h"),
        check(check="k2", b="yy", metric="val_acc", over={"quantity": "difference", "series": "a", "b": "b"}),
    ]))
    doc["figures"]["h"] = copy.deepcopy(doc["figures"]["f"])
    doc["figures"]["h"]["scales"] = {"full": doc["figures"]["h"]["scales"]["embedded"]}
    where = f"{PATH}: claim 'c1'"
    assert check_references(parse(doc, PATH), PATH, "embedded", HAVE, LOGGED) == [
        f"{where}: regime[0] ('k0'): figure 'g' is not declared at scale 'embedded'",
        f"{where}: regime[0].over ('k0'): series: series 'zz' is not in figure 'f'; have ['a', 'b']",
        f"{where}: regime[1] ('k1'): figure 'h' is not declared at scale 'embedded'",
        f"{where}: regime[2] ('k2'): b: series 'yy' is not in figure 'f'; have ['a', 'b']",
        f"{where}: regime[2] ('k2'): metric 'val_acc' is not logged by figure 'f'",
    ]


def test_numbers_where_names_belong_and_the_least_sizes_are_accepted():
    """A figure's model written as a YAML number, a claim's b_model too; a scale of one series; a full
    figure priced at half its runs."""
    doc = with_figure({"models": {"b": 1}}, c_(b_model=1, regime_cost={"needs": "n", "full": [{"figure": "f",
                                                                                            "times": 0.5}]}))
    doc["figures"]["f"]["scales"]["full"] = {"base": {"seed": 0}, "seeds": [0], "series": {"a": {}}}
    spec = parse(yaml.safe_load(yaml.safe_dump(doc)), PATH)
    assert spec.figures["f"].models == {"b": "1"} and spec.claims[0].b_model == "1"
    assert list(spec.figures["f"].scales["full"].series) == ["a"] and spec.claims[0].regime_cost.full[0].times == 0.5
    assert check_references(spec, PATH, "embedded", HAVE, LOGGED) == []


def test_a_figure_named_by_a_number_is_named_as_a_figure():
    # YAML reads `1:` as an integer: the figure is named, never mistaken for the claim at that position
    doc = spec_doc(c_(), c_(id="c2"))
    doc["figures"][1] = doc["figures"].pop("f")
    assert problem(doc).splitlines()[0] == f"{PATH}: figure 1, [key]: Input should be a valid string (got 1)"


def test_every_broken_name_of_rows_models_and_claims_is_checked_past_the_skipped_ones():
    """A figure not at the scale (listed first), a row of another scale and a claim of an unplanned
    figure are skipped, and what follows each is still checked; a figure's model names only series run
    at the scale; a claim's a and b, its model, its b_offset, its metric and an empty b2 each give their line."""
    doc = spec_doc(c_(id="g1", figure="g", a="zz"),
                   c_(a="zz", b="yy"),
                   c_(id="c2", a_model="7", measure="speedup", b_offset="@qq", metric="val_acc"),
                   c_(id="c3", metric="val_acc"),
                   c_(id="c4", b2=""))   # '' passes a2/b2's pairing (both read as absent) but names no series
    rows = [{"label": "other", "series": "zz", "scales": ["full"]}, {"label": "B", "series": "b", "model": 5}]
    doc["figures"] = {"g": copy.deepcopy(doc["figures"]["f"]), "h": copy.deepcopy(doc["figures"]["f"]),
                      **doc["figures"]}
    doc["figures"]["g"]["scales"] = {"full": doc["figures"]["g"]["scales"]["embedded"]}
    doc["figures"]["h"]["models"] = {"b": "7", "z": "7"}
    doc["figures"]["f"].update(kind="table", rows=rows)
    got = check_references(parse(doc, PATH), PATH, "embedded", {**HAVE, "h": {"b": ["0"]}}, LOGGED,
                           planned={"f", "h"})
    assert got == [
        f"{PATH}: figure 'h', models: 'b' -> '7'; the series has ['0']",
        f"{PATH}: figure 'f', rows[1] ('B'): model '5'; series 'b' has ['0', '1']",
        f"{PATH}: claim 'c1': figure 'f', a: series 'zz' does not exist; have ['a', 'b']",
        f"{PATH}: claim 'c1': figure 'f', b: series 'yy' does not exist; have ['a', 'b']",
        f"{PATH}: claim 'c2': figure 'f', a_model: model '7'; series 'a' has ['0']",
        f"{PATH}: claim 'c2': figure 'f', b_offset: series 'qq' does not exist; have ['a', 'b']",
        f"{PATH}: claim 'c3': figure 'f', metric: 'val_acc' is not logged by its runs; have ['val_loss']",
        f"{PATH}: claim 'c4': figure 'f', b2: series '' does not exist; have ['a', 'b']",
    ]


def test_a_sequential_claims_first_look_is_the_figures_declared_seeds():
    spec = parse(spec_doc(c_(sequential={"looks": [3, 6]}), c_(id="c2", sequential={"looks": [4, 6]})), PATH)
    assert check_references(spec, PATH, "embedded", HAVE, LOGGED) == [
        f"{PATH}: claim 'c2': sequential.looks: the first look is the figure's declared seeds (3 at scale "
        "'embedded'); got [4, 6]"]


@pytest.mark.parametrize("measure, neutral", [("final", 0.0), ("speedup", 1.0), ("churn", 0.0), ("comm_ratio", 1.0)])
def test_the_claims_figure_draws_each_measures_neutral_line_where_nothing_changed(measure, neutral):
    """analysis/plot_claims_summary.py's solid line: a difference (final, churn reduction) of 0, a ratio
    (speedup, bytes) of 1 (schema.MEASURES)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from analysis.plot_claims_summary import draw_row
    fig, ax = plt.subplots()
    row = {"measure": measure, "verdict": "holds", "effect_mean": 2.0, "interval_low": 1.5, "interval_high": 2.5}
    draw_row(ax, row, parse(spec_doc(c_(measure=measure)), PATH).claims[0], None)
    solid = [ln.get_xdata() for ln in ax.lines if ln.get_linestyle() == "-" and ln.get_color() == "black"]
    plt.close(fig)
    assert [list(x) for x in solid] == [[neutral, neutral]]
