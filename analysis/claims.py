"""A paper's claims table: each claim in replications/<paper>/experiments.yaml (`claims:`,
schema: analysis/schema.py), its regime checks, the effect measured at this scale and a verdict.

A claim compares series `a` with series `b` of one figure (models `a_model` / `b_model`,
default the figure's `models` entry, else "0"), on `metric` (default the figure's first
panel), by one `measure`. The effect is oriented so that a positive value is what the paper
claims (a better than b):
  final       per seed: metric(a) - metric(b) at the last evaluation, sign-flipped for metrics
              where lower is better (direction: codist.workloads.metrics); with `a2`/`b2`:
              [a - b] - weight2 x [a2 - b2] (the gain grows; weight2 < 1: a margin that is a
              fraction of another effect); a metric with no better direction (init_distance)
              takes the claim's `direction` ("higher" / "lower": which way the paper points)
  speedup     per seed: (steps b needs + `b_offset`) / steps a needs to reach one fixed `target`
              level (default "b_best": the least of b's per-seed best values, which every b seed
              reaches), both interpolated between evaluations; `b_offset: "@<series>"` is that
              series' train.steps at the scale (a two-phase student's phase 1). A seed where a
              never reaches it is censored: reported as "k of n reached", never averaged in as 0;
              its ratio is below b's steps / a's run length, so with censored seeds the interval
              is a t upper bound on those upper bounds (stats.upper_bound_interval) and no lower
              bound. `clock: wall_s` counts training seconds instead of updates. Neutral value 1
  churn       per pair of seeds: churn(b) - churn(a) (paper_table.py's values)
  comm_ratio  b's bytes per rank per update / a's between model groups; with `identity:` at the
              paper's own periods and sizes (analysis/comm_identity.py). Deterministic. Neutral 1

Verdict (docs/claims.md, "Claims"), in this order:
  1. `full_scale_only: why`: "not tested at this scale: why" (below the full scale); `not_run: why`
     (a coverage row: a finding of the paper that no scale of this harness runs): "not tested at
     this scale: no scale of this harness runs it: why", at every scale.
  2. a margin (`within: w`, or `at_least` below the neutral value: non-inferiority) on
     val_accuracy below what n seeds resolve at 80% power if the validation set were the only
     noise (stats.margin_needed with stats.val_set_sd; the real data set's validation size at
     full scale, regime.data_sizes, or the run's `train.eval_size` slice when smaller):
     "underpowered: ..." before anything is measured.
  3. the regime checks (analysis/regime.py, one rule: shown / refuted / not established by the seeds'
     one-sided 95% bounds; design facts read from the configs, listed apart and never counted as
     checks): any refuted, a design fact outside its bounds included: "not in the paper's regime:
     <check>: <measured> vs <required>"; else any not established: "regime not established: <check>:
     <measured> vs <required>; about k more seeds would settle it"; no verdict unless every check is shown.
     Then a planned seed (of a or b) without a finite effect (its run missing, a NaN value):
     "incomplete: k of n planned seeds usable (seed ...)"; no verdict from a subset of the seeds.
  4. otherwise, with n >= 3 seeds and one-sided bounds at 95% (t(0.95, n-1); churn: a seed-level
     jackknife, so one outlier seed cannot make it hold; stats.decide):
       `at_least: t` (default: the neutral value): holds if low > t; does not hold if high < t.
       `within: w`: holds if [low, high] lies inside neutral +/- w; does not hold if it lies
       outside; inconclusive otherwise. A censored speedup has no lower bound: it never holds.
  5. an inconclusive claim with a margin that its seeds could not resolve at 80% power given the
     measured seed-to-seed sd of the effect (at least the validation floor of 2.): "underpowered:
     ..."; a holds / does not hold keeps its one-sided error rate whatever the power, so only a
     non-result is explained this way. Any other inconclusive says which kind (issue 48): "the
     paper's effect (X) excluded at 95%" (`paper_effect` past one of our bounds), or "underpowered:
     n seeds give P power for the paper's effect at the measured paired sd; N would give 80%".

Every seed-based row carries `power`: the power its seeds had for the claim's `paper_effect` at the
measured paired sd (noncentral t: stats.power) and the smallest effect (a within claim: margin) they
resolve at 80% (stats.detectable). `regime` lists the measured checks with their state, `design` the
design facts, `regime_checks` both as JSON (check, state, design, value, bounds, n, requirement).

A claim reads its figure's declared seeds only (a figure a sequential claim extended holds more).
A claim with `sequential: {looks: [...]}` goes through 2.-5. at each planned look in turn, on that
look's first n seeds, with bounds at 1 - 0.05 / L, and stops as analysis/sequential.py says
(`sequential` column: the look, n, the level, final or the seeds the next look needs; the rows'
state goes to sequential.csv beside claims.csv, which the next plan reads).

Beside the verdict, each row says which tier tested the claim (`tier`: the figure's, schema.TIERS;
'not tested in this tier', naming the figure's tier and its command, where a figure of another tier
(schema.TIERS) has no tables; but where such a claim's checks that read other figures have tables and one
is refuted or not established, the rule's step 3 from those alone, with that figure's tier: no run of its
own could give it a verdict until that check is shown), which data its verdict stands on (`data`: "generated (<workload>
stand-in)", codist's own generator, or "real: <data set>", from its first series' run config),
whether its runs used the declared seeds (`seeds`: "declared + N" after make replicate SEEDS=N),
and when its design was fixed
(analysis/preregistration.py, from git): `design_commit`, `design_status` (before / with / after the
figure's first committed results) and `changed_after_results` (each later design change, what it
changed and why, from replications/design_changes.yaml). A claim not tested in its regime ("not tested
at this scale", "not in the paper's regime") carries `regime_cost`: what its regime would cost in hours
on 2 cores and on one H200, from --costs (results/bench/regime_cost.csv, benchmarks/regime_cost.py).

    python analysis/claims.py --paper replications/P/experiments.yaml --figures DIR --scale S \
        --csv DIR/claims.csv --markdown DIR/claims.md
    python analysis/claims.py --combine A/claims.csv B/claims.csv --csv all.csv --markdown all.md
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path

import pandas as pd
import yaml

from analysis import comm_identity
from analysis import paper_effect
from analysis import preregistration
from analysis import regime
from analysis import sequential
from analysis import stats
from codist.runlog import atomic_write_text
from analysis.figure_data import finals, higher_is_better, series_model
from analysis.schema import MEASURES, Claim, parse, tier_command

MIN_SEEDS = stats.MIN_SEEDS
COLUMNS = ["paper", "id", "claim", "source", "basis", "comparison", "measure", "metric", "n", "effect_mean",
           "effect_sd", "interval_low", "interval_high", "method", "rule", "regime", "reached", "verdict",
           "paper_value", "per_seed", "regime_sources", "tier", "seeds", "design_commit", "design_status",
           "changed_after_results", "sequential", "regime_cost", "design", "regime_checks", "paper_effect", "power",
           "data"]
VERDICTS = ("holds", "does not hold", "inconclusive", "regime not established", "not in the paper's regime",
            "not tested at this scale", "not tested in this tier", "underpowered", "incomplete")


class ClaimError(ValueError):
    """A claim that cannot be evaluated; the message names the file and the claim."""


@functools.lru_cache(maxsize=None)
def read_table(path: Path) -> pd.DataFrame:
    """A figure's CSV, read once however many claims use it (callers only filter it)."""
    return pd.read_csv(path, dtype={"seed": str} if path.name.endswith("_values.csv") else None)


@functools.lru_cache(maxsize=None)
def read_manifest(path: Path) -> dict:
    return json.loads(path.read_text())


def claim_metric(c: Claim, manifest: dict, curves: pd.DataFrame) -> str:
    return c.metric or (manifest.get("panels") or [None])[0] or curves["metric"].iloc[0]


def only_seeds(df: pd.DataFrame, seeds) -> pd.DataFrame:
    """The rows of `seeds` (None: every row); a pair of seeds ("0-1": churn) where both are."""
    if seeds is None:
        return df
    keep = {str(s) for s in seeds}
    return df[[set(str(s).split("-")) <= keep for s in df["seed"]]]


def manifest_of(manifest: dict, seeds) -> dict:
    """A figure's _runs.json with only the runs of `seeds` (None: all)."""
    if seeds is None:
        return manifest
    keep = {str(s) for s in seeds}
    return {**manifest, "runs": [r for r in manifest["runs"] if str(r["seed"]) in keep]}


def effects(c: Claim, manifest: dict, figures: Path, seeds=None):
    """(interval, per-unit effects, reached text) of one claim, oriented so that positive = as claimed;
    `seeds`: only those seeds' rows (a sequential look, or a figure's declared seeds; None: all)."""
    fig = c.figure
    curves = only_seeds(read_table(figures / f"{fig}_curves.csv"), seeds)
    metric = claim_metric(c, manifest, curves)
    am = c.a_model or series_model(manifest, c.a)
    bm = c.b_model or series_model(manifest, c.b)
    if c.measure == "final":
        sign = 1.0 if (c.direction == "higher" if c.direction else higher_is_better(metric)) else -1.0
        d = sign * (finals(curves, c.a, am, metric) - finals(curves, c.b, bm, metric))
        if c.a2:
            d2 = sign * (finals(curves, c.a2, series_model(manifest, c.a2), metric)
                         - finals(curves, c.b2, series_model(manifest, c.b2), metric))
            d = d - c.weight2 * d2
        d = d.dropna()
        return stats.t_interval(d), d, ""
    if c.measure == "speedup":
        r = regime.speedups(curves, c.a, am, c.b, bm, metric, c.target, offset_steps(c, manifest), c.clock)
        reached = int(r["ratio"].notna().sum())
        text = f"{reached} of {len(r)} seeds reached {r['target'].iloc[0]:.4g}" if len(r) else ""
        x = pd.Series({seed: row.ratio if not math.isnan(row.ratio) else
                       (f"< {row.censored_bound:.3g}" if not math.isnan(row.censored_bound) else "never")
                       for seed, row in r.iterrows()}, dtype=object)
        if reached == len(r):
            return stats.t_interval(r["ratio"]), x, text
        u = r["ratio"].fillna(r["censored_bound"])
        if u.isna().any():   # b itself never reached a fixed target on some seed: no bound either way
            return stats.Interval(len(u), math.nan, math.nan, math.nan, math.nan, "b never reached the target"), x, text
        return stats.upper_bound_interval(u), x, text
    if c.measure == "churn":
        vals = only_seeds(read_table(figures / f"{fig}_values.csv"), seeds)
        churn = vals[vals["column"] == "churn"]
        va = churn[churn["series"] == c.a].set_index("seed")["value"]
        vb = churn[churn["series"] == c.b].set_index("seed")["value"]
        d = (vb - va).dropna()
        return stats.jackknife_interval(stats.seed_pairs(d.to_dict())), d, ""
    if c.measure == "comm_ratio":
        table = only_seeds(read_table(figures / f"{fig}.csv"), seeds)
        if c.identity:
            r, how = comm_identity.ratio(c.identity, table, manifest.get("configs") or {}, c.a, c.b)
            return stats.Interval(1, r, 0.0, r, r, how), pd.Series({"identity": r}), ""
        ta = table[table["series"] == c.a].set_index("seed")["between_group_sent_bytes_per_rank_per_update"]
        tb = table[table["series"] == c.b].set_index("seed")["comm_sent_bytes_per_rank_per_update"]
        d = (tb / ta).replace([math.inf], float("nan")).dropna()
        return stats.Interval(len(d), float(d.mean()), 0.0, float(d.min()), float(d.max()),
                              "deterministic (bytes are the same on every seed)"), d, ""
    raise ClaimError(f"measure {c.measure!r}; allowed: {sorted(MEASURES)}")


def offset_steps(c: Claim, manifest: dict) -> float:
    """A speedup's b_offset in steps: a number, or "@<series>": that series' train.steps."""
    if not isinstance(c.b_offset, str):
        return c.b_offset
    cfg = (manifest.get("configs") or {}).get(c.b_offset[1:])
    if cfg is None:
        raise ClaimError(f"claim {c.id!r}: b_offset {c.b_offset!r}: the figure's _runs.json has no config for "
                         f"series {c.b_offset[1:]!r}; have {sorted(manifest.get('configs') or {})}")
    return cfg["train"]["steps"]


def deterministic_verdict(iv: stats.Interval, at_least) -> tuple[str, str]:
    t = 1.0 if at_least is None else float(at_least)
    return ("holds" if iv.low > t else "does not hold"), f"effect > {t:g}"


def val_floor(c: Claim, manifest: dict, metric: str) -> tuple[float, float]:
    """(validation examples, sd of one seed's effect if they were its only noise) of a
    val_accuracy `final` claim; (nan, 0) otherwise. The real data set's size at full scale, or the
    slice a run evaluates on (`train.eval_size`) when it is smaller."""
    cfg = (manifest.get("configs") or {}).get(c.a)
    if c.measure != "final" or metric != "val_accuracy" or not cfg:
        return math.nan, 0.0
    v = regime.data_sizes(cfg["workload"])[1]
    if not v or math.isnan(v):
        return math.nan, 0.0
    v = min(v, (cfg.get("train") or {}).get("eval_size") or v)
    return v, stats.val_set_sd(v, terms=4 if c.a2 else 2)


def judge(c: Claim, manifest: dict, figures: Path, scale: str, tables, seeds=None,
          look: sequential.Look | None = None) -> dict:
    """The verdict fields of one claim (the order of the module docstring) from `manifest`'s runs and
    `seeds`' rows (None: all); `look`: a sequential claim's look (bounds at its level, the power rule
    at its last look's seeds; analysis/sequential.py)."""
    out = {"regime": "", "design": "", "regime_checks": "", "reached": "", "method": "", "rule": "", "n": 0,
           "effect_mean": math.nan, "effect_sd": math.nan, "interval_low": math.nan, "interval_high": math.nan,
           "per_seed": "", "power": ""}
    if c.full_scale_only and scale != "full":
        return {**out, "verdict": f"not tested at this scale: {c.full_scale_only}"}
    neutral = MEASURES[c.measure]
    margin = stats.margin_of(neutral, c.at_least, c.within)
    n_seeds = look.n_max if look else len({r["seed"] for r in manifest["runs"] if r["series"] == c.a})
    level = look.confidence if look else stats.CONFIDENCE
    v_ex, floor_sd = val_floor(c, manifest, c.metric or (manifest.get("panels") or [None])[0])
    if margin and floor_sd and n_seeds >= 2:
        need = stats.margin_needed(n_seeds, floor_sd, margin[1], level)
        if margin[0] < need:
            return {**out, "verdict": f"underpowered: margin {margin[0]:g} < {need:.3g}, the least that "
                                      f"{n_seeds} seeds x {v_ex:g} validation examples resolve (80% power"
                                      + (f", bounds at {level:.4g}: the last look's)" if look else ")")}
    try:
        results = regime.run_checks(c, figures, tables)
    except regime.RegimeError as e:
        raise ClaimError(str(e)) from None
    out["regime"] = "; ".join(r.text() for r in results if not r.design)
    out["design"] = "; ".join(r.text() for r in results if r.design)
    out["regime_checks"] = checks_json(results)
    iv, per, reached = effects(c, manifest, figures, seeds)
    if look:
        iv = stats.at_confidence(iv, look.confidence)
    planned = sorted({str(r["seed"]) for r in manifest["runs"] if r["series"] in (c.a, c.b)})
    used = {s for unit in per.index for s in str(unit).split("-")}   # churn's units are pairs "0-1"
    lost = [s for s in planned if s not in used] if c.measure != "comm_ratio" else []
    out.update(n=iv.n, effect_mean=iv.mean, effect_sd=iv.sd, interval_low=iv.low, interval_high=iv.high,
               method=iv.method, reached=reached, power=power_text(c, iv, neutral),
               per_seed="; ".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in per.items()))
    stopped = regime_verdict(results)
    if stopped:
        return {**out, "verdict": stopped}
    if lost:   # a verdict is drawn from every planned seed or from none: never silently from fewer
        return {**out, "verdict": f"incomplete: {len(planned) - len(lost)} of {len(planned)} planned seeds "
                                  f"usable (seed {', '.join(lost)}: a run missing or a non-finite value)"}
    if c.measure == "comm_ratio":
        v, out["rule"] = deterministic_verdict(iv, c.at_least)
        return {**out, "verdict": v}
    v, out["rule"] = stats.decide(iv, neutral, c.at_least, c.within)
    if v == "inconclusive" and margin and iv.n >= MIN_SEEDS and not math.isnan(iv.sd) and (look is None or look.last):
        sd = max(iv.sd, floor_sd)
        need = stats.margin_needed(iv.n, sd, margin[1], level)
        if margin[0] < need:
            v = (f"underpowered: margin {margin[0]:g} < {need:.3g}, the least that {iv.n} seeds resolve at 80% power "
                 f"with the effect's measured sd {sd:.3g}")
    if v == "inconclusive" and (look is None or look.last):
        v = "inconclusive: " + inconclusive_kind(c, iv, neutral)
    return {**out, "verdict": v}


def regime_verdict(results: list) -> str | None:
    """Step 3: 'not in the paper's regime: <each refuted check>' where any check is refuted, else 'regime
    not established: <each unsettled one>'; None where every check is shown."""
    for state, kind in (("refuted", "not in the paper's regime"), ("not established", "regime not established")):
        stops = [r for r in results if r.state == state]
        if stops:
            return f"{kind}: " + "; ".join(r.reason() for r in stops)
    return None


def checks_json(results: list) -> str:
    """The regime_checks column: each check's state, value, bounds and requirement ('' without checks)."""
    return json.dumps([{"check": r.check, "state": r.state, "design": r.design, "value": _round(r.value),
                        "low": _round(r.low), "high": _round(r.high), "n": r.n,
                        "requirement": r.requirement} for r in results]) if results else ""


def _round(x: float):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(f"{x:.6g}")


def inconclusive_kind(c: Claim, iv: stats.Interval, neutral: float) -> str:
    """Which kind of inconclusive (issue 48): the paper's effect excluded at 95% (it lies past one of
    our one-sided bounds: the seeds resolve it, and it is not what we measure), or underpowered for it
    at the measured paired sd, with the power the seeds had and the seeds that would give 80%."""
    e = c.paper_effect
    if e is None:
        d = stats.detectable(iv.n, iv.sd, neutral, c.at_least, c.within)
        return (f"the paper gives no number to test against; {iv.n} seeds resolve "
                + (f"a margin of {d:.3g}" if c.within is not None else f"an effect of {d:.3g}") + " at 80% power")
    if (not math.isnan(iv.low) and e < iv.low) or (not math.isnan(iv.high) and e > iv.high):
        return f"the paper's effect ({e:g}) excluded at 95% (ours [{_bound(iv.low)}, {_bound(iv.high)}])"
    if math.isnan(iv.low) and c.measure == "speedup":
        return f"a censored speedup has no lower bound, so it cannot hold; the paper's effect ({e:g}) is not excluded"
    p, need = power_for(c, iv, neutral)
    return (f"underpowered: {iv.n} seeds give {p:.2f} power for the paper's effect ({e:g}) at the measured paired "
            f"sd {iv.sd:.3g}; " + (f"{need} would give 80%" if need else "no number of seeds up to 1,000 gives 80%"))


def power_for(c: Claim, iv: stats.Interval, neutral: float) -> tuple[float, int | None]:
    """(power of the claim's seeds for its paper_effect at the measured sd, the seeds that give 80%)."""
    return (stats.power(iv.n, iv.sd, c.paper_effect, neutral, c.at_least, c.within),
            stats.seeds_for_power(iv.sd, c.paper_effect, neutral, c.at_least, c.within))


def _bound(x: float) -> str:
    return "none" if math.isnan(x) else f"{x:.3g}"


def power_text(c: Claim, iv: stats.Interval, neutral: float) -> str:
    """The power column of a seed-based row: the power its seeds had for the paper's effect at the
    measured paired sd (noncentral t, stats.power), and what they resolve at 80% (stats.detectable)."""
    if c.measure == "comm_ratio" or iv.n < 2 or not (iv.sd > 0):
        return ""
    d = stats.detectable(iv.n, iv.sd, neutral, c.at_least, c.within)
    resolves = (f"resolves a margin of {d:.3g}" if c.within is not None else f"resolves an effect of {d:.3g}") + \
        f" at 80% (sd {iv.sd:.3g}, {iv.n} seeds)"
    if c.paper_effect is None:
        return f"the paper gives no number; {resolves}"
    if math.isnan(iv.low) and c.measure == "speedup" and "censored" in iv.method:
        return f"0 for the paper's {c.paper_effect:g} (a censored speedup cannot hold); {resolves}"
    p, need = power_for(c, iv, neutral)
    return (f"{p:.2f} for the paper's {c.paper_effect:g}; 80% needs " + (f"{need} seeds" if need else "over 1,000 seeds")
            + f"; {resolves}")


def regime_sources(c: Claim) -> str:
    """The claim's checks and the paper's text each operationalises (JSON: [[check, source], ...])."""
    return json.dumps([[r.check, r.source] for r in c.regime]) if c.regime and not (c.full_scale_only or c.not_run) else ""


def verdict_fields(c: Claim, manifest: dict, figures: Path, scale: str, view) -> tuple[dict, tuple | None]:
    """(verdict fields, (look, seeds_needed) of a sequential claim, else None). A claim reads its
    figure's declared seeds (all of them unless a sequential claim extended the figure: the plan's
    `declared_seeds`); a sequential claim the seeds of the look its rule stops at
    (sequential.decide_looks). `view(fig, seeds)`: a figure's (manifest, curves) for those seeds (None:
    its declared ones), what its regime checks read."""
    def tables_for(seeds):
        return lambda fig: view(fig, seeds if fig == c.figure else None)
    if not c.sequential or (c.full_scale_only and scale != "full"):
        seeds = manifest.get("declared_seeds")
        return judge(c, manifest_of(manifest, seeds), figures, scale, tables_for(seeds), seeds), None
    held = sequential.figure_seeds(manifest)
    fields, look, needed = sequential.decide_looks(
        c.sequential.looks, manifest.get("declared_seeds") or held, set(held),
        lambda lk: judge(c, manifest_of(manifest, lk.seeds), figures, scale, tables_for(lk.seeds), lk.seeds, lk))
    return {**fields, "sequential": sequential.describe(look, needed)}, (look, needed)


def stopped_elsewhere(c: Claim, spec, view, tier: str) -> dict | None:
    """A claim of another tier whose figure has no tables, but whose regime checks that read only other
    figures (`figure:` set, its `over` too) have tables here and one of them is refuted or not
    established: its verdict is the rule's step 3 from those runs alone, since no run of its own
    figure could give a verdict until that check is shown (issue 50: the anil-ablations claims read
    fig2a_saturated's saturation check). Returns its verdict fields, with the tier, seeds and data of the
    figure whose runs decided it, or None: nothing readable here stops it."""
    def elsewhere(q) -> bool:
        return bool(q.figure) and q.figure != c.figure
    read = []   # (check, its result)
    for r in c.regime:
        if regime.is_design(r) or not elsewhere(r) or (r.over is not None and not elsewhere(r.over)):
            continue
        try:
            read.append((r, regime.evaluate(r, c, view)))
        except regime.RegimeError:   # that figure's tables are not here either
            continue
    results = [res for _, res in read]
    verdict = regime_verdict(results)
    if verdict is None:
        return None
    state = "refuted" if any(res.state == "refuted" for res in results) else "not established"
    deciding = next(r for r, res in read if res.state == state)
    note = (f" (read on figure {deciding.figure}'s runs; figure {c.figure}, in the {tier} tier, was not run: no run of it "
            f"could give a verdict until this is shown)")
    fields = {"verdict": verdict + note, "regime": "; ".join(res.text() for res in results),
              "regime_checks": checks_json(results)}
    manifest = view(deciding.figure)[0]
    return {**fields, "tier": spec.figures[deciding.figure].tier, "seeds": seeds_text(manifest),
            "data": data_of(manifest, deciding.series or c.a)}


def evaluate(paper_file: Path, figures: Path, scale: str, costs: Path | None = None) -> pd.DataFrame:
    return evaluate_with_state(paper_file, figures, scale, costs)[0]


UNTESTED = ("not tested at this scale", "not in the paper's regime", "regime not established")
# what a workload's `dataset` reads (its *_config.py Literal): `embedded` is generated by codist's own
# code (the stand-ins); every other value is a data set read from files
REAL_DATA = {"fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
             "imagefolder": "ImageNet (ImageFolder)", "criteo": "Criteo", "text": "text corpus",
             "fairseq": "fairseq-prepared parallel text"}


def data_of(manifest: dict, series: str) -> str:
    """Which data a claim's verdict stands on, from its first series' run config: 'generated (<workload>
    stand-in)' or 'real: <data set>'; '' where the figure's manifest has no config for it."""
    workload = ((manifest.get("configs") or {}).get(series) or {}).get("workload") or {}
    dataset = workload.get("dataset")
    if not dataset:
        return ""
    if dataset == "embedded":
        return f"generated ({workload.get('name', '?')} stand-in)"
    return f"real: {REAL_DATA.get(dataset, dataset)}"


def cost_texts(costs: Path | None, paper: str) -> dict[str, str]:
    """claim id -> what its regime would cost, from benchmarks/regime_cost.py's table (none: {})."""
    if costs is None or not Path(costs).exists():
        return {}
    df = pd.read_csv(costs)
    out = {}
    for r in df[df.paper == paper].itertuples():
        gpu = (f"{r.gpu_bound}{r.gpu_h_one:.3g} h on one {r.gpu.upper()}" if not pd.isna(r.gpu_h_one)
               else f"one {r.gpu.upper()}: no measured rate")
        out[r.claim] = f"{r.cpu_bound}{r.cpu_h_2cores:.3g} h on 2 cores, {gpu} ({Path(costs).name}): {r.needs}"
    return out


def evaluate_with_state(paper_file: Path, figures: Path, scale: str, costs: Path | None = None,
                        only: list[str] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """The claims table and the rows of its sequential claims' state (analysis/sequential.py); a claim
    not tested in its regime carries what its regime would cost, from `costs` (regime_cost.csv).
    `only`: these claims alone (their figures' tables are all it reads: a results root that ran some
    figures only, as `make gpu-anil`'s)."""
    paper_file = Path(paper_file)
    spec = parse(yaml.safe_load(paper_file.read_text()), paper_file)
    unknown = sorted(set(only or ()) - {c.id for c in spec.claims})
    if unknown:
        raise ClaimError(f"{paper_file}: no claim {', '.join(map(repr, unknown))}; its claims: "
                         f"{', '.join(c.id for c in spec.claims)}")

    def view(fig, seeds=None):
        runs = figures / f"{fig}_runs.json"
        if not runs.exists():
            raise regime.RegimeError(f"figure {fig!r} has no {runs} at scale {scale!r}")
        manifest = read_manifest(runs)
        seeds = manifest.get("declared_seeds") if seeds is None else seeds
        return manifest_of(manifest, seeds), only_seeds(read_table(figures / f"{fig}_curves.csv"), seeds)

    history = preregistration.records(paper_file, scale)   # {} without git history
    cost_of = cost_texts(costs, spec.paper)
    changes = preregistration.ledger(paper_file.resolve().parent.parent).get(spec.paper, [])
    rows, state = [], []
    for c in spec.claims:
        if only and c.id not in only:
            continue
        c = c.at(scale).model_copy(update={"paper_effect": paper_effect.of(c, spec)})   # the power column's effect
        rec = history.get(c.id)
        where = f"{paper_file}: claim {c.id!r}"
        runs = figures / f"{c.figure}_runs.json"
        declared = scale in spec.figures[c.figure].scales
        tier = spec.figures[c.figure].tier
        # another tier's figure's tables exist only where `make replicate TIER=<tier>` (or the reference) made them
        other_tier = (tier != "default" and not runs.exists() and declared and not c.full_scale_only and not c.not_run
                      and scale != "full")
        if not runs.exists() and declared and not c.full_scale_only and not c.not_run and not other_tier:
            raise ClaimError(f"{where}: figure {c.figure!r} has no {runs} at scale {scale!r}")
        manifest = read_manifest(runs) if runs.exists() else {"runs": [], "panels": []}
        try:
            if c.not_run:
                fields = {"verdict": f"not tested at this scale: no scale of this harness runs it: {c.not_run}"}
            elif other_tier:
                fields = {"verdict": f"not tested in this tier: figure {c.figure!r} is in the {tier} tier "
                                     f"({tier_command(tier)})"}
                fields = stopped_elsewhere(c, spec, view, tier) or fields
            elif declared or c.full_scale_only:
                fields, stop = verdict_fields(c, manifest, figures, scale, view)
                if stop:
                    state.append(sequential.state_row(spec.paper, c.id, c.figure, *stop, verdict_kind(fields["verdict"])))
            else:
                fields = {"verdict": f"not tested at this scale: figure {c.figure!r} has no {scale!r} runs"}
        except (KeyError, ValueError) as e:
            raise ClaimError(f"{where}: {e}") from None
        tested = not verdict_kind(fields["verdict"]).startswith("not tested")
        comparison = f"{c.a} vs {c.b}" + (f" minus {'' if c.weight2 == 1 else f'{c.weight2:g} x '}({c.a2} vs {c.b2})" if c.a2 else "")
        rows.append({"paper": spec.paper, "id": c.id, "claim": c.claim, "source": c.source, "basis": c.basis,
                     "comparison": comparison, "measure": c.measure,
                     "metric": c.metric or (manifest.get("panels") or [""])[0], "paper_value": c.paper,
                     "paper_effect": c.paper_effect if c.paper_effect is not None else math.nan,
                     "regime_sources": regime_sources(c), "tier": tier if tested else "",
                     "seeds": seeds_text(manifest) if tested else "",
                     "design_commit": rec.design_commit[:9] if rec else "",
                     "design_status": preregistration.status_text(rec) if rec else "no git history",
                     "changed_after_results": preregistration.row_note(rec, changes) if rec else "",
                     "regime_cost": cost_of.get(c.id, "") if verdict_kind(fields["verdict"]) in UNTESTED else "",
                     "data": data_of(manifest, c.a) if tested else "",
                     **fields})
    return pd.DataFrame(rows, columns=COLUMNS), state


def seeds_text(manifest: dict) -> str:
    """Which seeds the claim's runs used: the declared ones, or shifted (make replicate SEEDS=N)."""
    offset = manifest.get("seed_offset", 0)
    return f"declared + {offset} (fresh seeds, not the committed runs)" if offset else "declared"


def verdict_kind(v: str) -> str:
    return next((k for k in VERDICTS if str(v).startswith(k)), str(v))


def chance_counts(df: pd.DataFrame) -> tuple[int, int, float]:
    """(m, m_holds, alpha): the claims that went through the seed-based rule (a verdict or a non-result
    from n >= MIN_SEEDS seeds; byte identities are exact, not tests), those of them that could read
    "holds" (a censored speedup has no lower bound, so never), and each one-sided bound's error rate."""
    kinds = df["verdict"].map(verdict_kind)
    tested = ((df["measure"] != "comm_ratio") & (pd.to_numeric(df["n"], errors="coerce") >= MIN_SEEDS)
              & kinds.isin(["holds", "does not hold", "inconclusive", "underpowered"]))
    can_hold = tested & pd.to_numeric(df["interval_low"], errors="coerce").notna()
    return int(tested.sum()), int(can_hold.sum()), 1 - stats.CONFIDENCE


def chance_line(df: pd.DataFrame) -> str:
    """How many verdicts the table's seed-based tests give by chance alone: each bound is one-sided at
    alpha, so a claim whose true effect sits exactly at its threshold reads "holds" with probability at
    most alpha (an equivalence needs both bounds inside: at most alpha at either edge), and "does not
    hold" likewise; the expected count is the sum over claims (an upper bound: an effect away from its
    threshold errs less often)."""
    m, m_holds, alpha = chance_counts(df)
    none = (1 - alpha) ** m_holds
    return (f"{m} claims went through the seed-based rule, each bound one-sided at alpha = {alpha:.2g}: were "
            f"every true effect exactly at its threshold, about {alpha:.2g} x {m_holds} = {alpha * m_holds:.2g} "
            f"of them would still read \"holds\" by chance ({m - m_holds} censored speedups never can; the chance that "
            f"none does, with independent claims: {none:.2f}), and at most {alpha:.2g} x {m} = {alpha * m:.2g} "
            f"\"does not hold\" (the byte identities are exact, not tests).")


def sources_section(df: pd.DataFrame) -> str:
    """Each regime check once, with the claims that use it and its source in the paper."""
    users: dict[tuple[str, str], list[str]] = {}
    for r in df.itertuples():
        for check, source in (json.loads(r.regime_sources) if isinstance(r.regime_sources, str) and r.regime_sources
                              else []):
            users.setdefault((check, source), []).append(f"{r.paper} {r.id}")
    lines = [f"- **{check}** ({', '.join(ids)}). Source: {source}" for (check, source), ids in users.items()]
    return ("\n## Regime checks and the paper's text they operationalise\n\n" + "\n".join(lines) + "\n") if lines else ""


MEASURE_UNITS = {"final": "difference in {metric}", "speedup": "speedup (x)", "churn": "churn reduction",
                 "comm_ratio": "bytes ratio (x, exact)"}


def _num(v) -> str:
    return "" if pd.isna(v) else f"{v:.3g}"


def ours_text(r) -> str:
    """Our effect with its interval, compact: mean [low, high] (one-sided 95% bounds); a censored
    speedup has only its upper bound; a deterministic identity is exact; nothing measured: '-'."""
    if pd.isna(r["effect_mean"]):
        return "-"
    unit = MEASURE_UNITS.get(r["measure"], r["measure"]).format(metric=r["metric"] if isinstance(r["metric"], str) else "")
    if r["measure"] == "comm_ratio":
        return f"{r['effect_mean']:,.0f}x ({unit})"
    if pd.isna(r["interval_low"]) and not pd.isna(r["interval_high"]):
        return f"{_num(r['effect_mean'])} [none, {_num(r['interval_high'])}] ({unit}; censored: upper bound only)"
    return f"{_num(r['effect_mean'])} [{_num(r['interval_low'])}, {_num(r['interval_high'])}] ({unit})"


def regime_status(r) -> str:
    """'k of m regime checks shown' (and the design facts) from the regime_checks column, '' where no
    check ran."""
    text = r.get("regime_checks")
    checks = json.loads(text) if isinstance(text, str) and text else []
    if not checks:
        return ""
    measured = [c for c in checks if not c["design"]]
    design = len(checks) - len(measured)
    shown = sum(c["state"] == "shown" for c in measured)
    return (f"{shown} of {len(measured)} regime checks shown" if measured else "no measured regime check") + \
        (f", {design} design fact{'s' if design != 1 else ''}" if design else "")


def verdict_text(r) -> str:
    """The verdict's kind with the regime status and the tier that tested it (when not the default);
    the reason stays in the details."""
    kind, status = verdict_kind(r["verdict"]), regime_status(r)
    notes = [status] if status else []
    if isinstance(r.get("tier"), str) and r["tier"] not in ("", "default"):
        notes.append(f"{r['tier']} tier")
    if isinstance(r.get("data"), str) and r["data"].startswith("real: "):   # generated: the default, said once above
        notes.append(r["data"].replace("real: ", "real data: "))
    if isinstance(r.get("seeds"), str) and r["seeds"].startswith("declared +"):
        notes.append("fresh seeds")
    if isinstance(r.get("sequential"), str) and r["sequential"]:   # "look j of L (...)": its first words
        notes.append(" ".join(r["sequential"].split()[:4]) + (", more seeds asked" if "next look" in r["sequential"] else ""))
    return kind + (f" ({', '.join(notes)})" if notes else "")


def _cell(text) -> str:
    return " ".join(str("" if pd.isna(text) else text).split()).replace("|", "\\|")


def anchor(r) -> str:
    return f"{r['paper']}-{r['id']}".lower().replace(".", "-")


def compact_table(df: pd.DataFrame, details: str | None = "") -> str:
    """paper | claim | paper's number | ours with interval | verdict: one short line per claim; the
    long text (reasons, checks, methods, seeds) is in the details section `details` links to."""
    lines = ["| paper | claim | paper's number | ours [one-sided 95% bounds] | verdict |", "|---|---|---|---|---|"]
    for _, r in df.iterrows():
        claim = f"`{r['id']}`: {_cell(r['claim'])}" + (f" ([details]({details}#{anchor(r)}))" if details is not None else "")
        lines.append(f"| {r['paper']} | {claim} | {_cell(r['paper_value'])} | {ours_text(r)} | {verdict_text(r)} |")
    return "\n".join(lines) + "\n"


def details_section(df: pd.DataFrame) -> str:
    """Every claim's long text: the full verdict, what was compared, the regime checks, the method,
    the rule, the seeds."""
    out = ["\n## Details\n"]
    for _, r in df.iterrows():
        out.append(f'<a id="{anchor(r)}"></a>\n\n### {r["paper"]} `{r["id"]}`\n')
        fields = [("claim", r["claim"]), ("source", r["source"]), ("paper", r["paper_value"]),
                  ("compares", f"{r['comparison']} ({r['measure']}" + (f" of {_cell(r['metric'])}" if _cell(r["metric"]) else "") + f", {r['basis']})"),
                  ("verdict", r["verdict"]), ("regime checks", r["regime"]), ("design", r.get("design")),
                  ("effect", ours_text(r)), ("power", r.get("power")),
                  ("seeds", r["n"]), ("seed lists", r.get("seeds")),
                  ("sequential design", r.get("sequential")), ("tier", r.get("tier")),
                  ("design fixed at", f"{_cell(r.get('design_commit'))}: {_cell(r.get('design_status'))}"),
                  ("changed after results", r.get("changed_after_results")),
                  ("regime's cost", r.get("regime_cost")), ("method", r["method"]), ("rule", r["rule"]), ("reached", r["reached"]),
                  ("per seed", r["per_seed"])]
        out += [f"- {k}: {_cell(v)}" for k, v in fields if _cell(v) not in ("", "0", "nan")]
        out.append("")
    return "\n".join(out)


def markdown(df: pd.DataFrame, heading: str) -> str:
    """A compact table (one short line per claim) and the details below it."""
    counts = df["verdict"].map(verdict_kind).value_counts()
    summary = ", ".join(f"{counts.get(k, 0)} {k}" for k in VERDICTS)
    return (f"# {heading}\n\n{len(df)} claims: {summary}. {chance_line(df)} Effect: positive = as the paper claims; "
            f"ours = mean [lower, upper] one-sided 95% bounds over seeds (the two-sided 90% t interval; churn: a "
            f"seed-level jackknife); a verdict is drawn only when every regime check is shown (the seeds' one-sided 95% "
            f"bound inside its threshold; design facts are listed apart, never counted); rules: "
            f"analysis/claims.py and docs/claims.md ('Claims'). Reasons, regime checks, methods and seeds: the details "
            f"below.\n\n" + compact_table(df, details="") + details_section(df) + sources_section(df))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--paper", help="replications/<paper>/experiments.yaml")
    p.add_argument("--figures", help="results/<scale>/<paper>/ (the figures' tables)")
    p.add_argument("--scale", default="embedded")
    p.add_argument("--combine", nargs="+", help="per-paper claims.csv files to join into one table")
    p.add_argument("--costs", type=Path, help="results/bench/regime_cost.csv (benchmarks/regime_cost.py)")
    p.add_argument("--claims", nargs="+", default=None, help="these claims of --paper only (no sequential state is "
                   "written: a partial table)")
    p.add_argument("--csv", required=True)
    p.add_argument("--markdown", required=True)
    args = p.parse_args(argv)
    if args.combine:
        df = pd.concat([pd.read_csv(f) for f in args.combine], ignore_index=True)
        heading = f"Claims of all papers ({args.scale} scale)"
    else:
        if not (args.paper and args.figures):
            p.error("--paper and --figures are required without --combine")
        try:
            df, state = evaluate_with_state(Path(args.paper), Path(args.figures), args.scale, args.costs, args.claims)
        except ClaimError as e:
            print(f"claims: {e}", file=sys.stderr)
            return 2
        state_file = Path(args.csv).parent / sequential.STATE
        if not args.claims:   # a partial table writes no state: the next plan's seeds are the full table's to extend
            if state:   # what the next plan reads from this results root (workflows/experiments.py)
                sequential.write_state(state_file, state)
            elif state_file.exists():   # no sequential claim any more: a stale state must not extend a figure
                state_file.unlink()
        heading = f"Claims of {df['paper'].iloc[0] if len(df) else args.paper} ({args.scale} scale)"
    if len(df):
        df["n"] = df["n"].astype("Int64")   # seed counts: a column with blanks reads as float ("3.0 seeds")
    atomic_write_text(args.csv, df.to_csv(index=False))
    atomic_write_text(args.markdown, markdown(df, heading))
    print(f"{len(df)} claims: " + ", ".join(f"{k} {v}" for k, v in df["verdict"].map(verdict_kind).value_counts().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
