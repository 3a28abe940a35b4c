"""The one schema of replications/<paper>/experiments.yaml: figures, their scales and series,
table rows, claims and their regime checks. Every section forbids unknown keys, and
`check_references` ties the names together (a claim's figure, series and models, a row's series,
a metric the workload does not log) so that a typo fails the plan (`snakemake -n`) with the file,
figure and key named, before anything trains.

Used by workflows/experiments.py (the plan) and analysis/claims.py (the claims table).
"""
from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

KINDS = ("curves", "table", "bars")
# A figure's tier at the CPU-sized scales: default (every figure sized for `make replicate` on 2 CPU
# cores), paper (the paper-regime figures: `make replicate TIER=paper`), decisive (the pilots and the
# runs that decide whether a verdict against a paper is an artefact of the stand-in, issues 48-49:
# `make replicate TIER=decisive`), real (Sodhani's designs on a real data set, Fashion-MNIST, and their
# pilots, issue 49: `make replicate TIER=real`), real-sun (Sun's designs on Fashion-MNIST and their
# pilot: `make replicate TIER=real-sun`), real-sun-k8 (Sun's K = 8 on Fashion-MNIST at the fixed total and
# its pilot, apart from real-sun when its final's measured pilot put the two over 4 h: `make replicate
# TIER=real-sun-k8`), anil (Anil's Fig. 1a and 2a where sync has saturated, the LM at batch 4,096 in bf16,
# issue 50: `make replicate TIER=anil`), anil-ablations (the rest of Anil's LM design there: label
# smoothing, same vs disjoint data, stale teachers, the two-phase student: `make replicate
# TIER=anil-ablations`). Apart so that each tier fits 4 h on 2 cores: as one tier the
# real images' runs took 4.2 h of wall time under load 3-9 (the runs' recorded elapsed times, two at
# once) before fig3_fmnist and Sun's seeds 3-4 were added, 6.2 h with them at the same rates; Sodhani's
# 3.5 h and Sun's 2.7 h of it. Each other tier plans the default figures and its own, not the other
# tiers', except the tiers it builds on (BUILDS_ON); the full scale plans every figure whatever the tier
# (workflows/experiments.py in_tier).
TIERS = ("default", "paper", "decisive", "real", "real-sun", "real-sun-k8", "anil", "anil-ablations")
# A tier whose checks and shared runs are another tier's figures plans that tier's figures too: with
# LEDGER=keep their runs are restored from the committed run ledger, not trained (so the tier's own
# 4 h holds); without it they train as well.
BUILDS_ON = {"anil-ablations": ("anil",)}
MEASURES = {"final": 0.0, "speedup": 1.0, "churn": 0.0, "comm_ratio": 1.0}   # -> neutral value
BASES = ("step-matched", "device-matched", "round-matched")
# what a regime check measures: analysis/regime.py registers each (regime.QUANTITIES, the same names:
# tests/test_regime.py); design quantities are read from the config, the others per seed
QUANTITIES = ("value", "last_gain", "gain_over", "difference", "speedup", "train_val_gap",
              "epochs", "round_epochs", "rounds", "period_fraction", "lr_wd_sum", "critical_ratio",
              "exchange_lag", "label_noise_floor")
ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
MIN_LOOK = 3   # = stats.MIN_SEEDS (tests/test_sequential.py): a look at fewer seeds cannot decide (stats.decide)


def tier_command(tier: str) -> str:
    """The command that runs a tier's figures (make replicate, with TIER= outside the default tier)."""
    return "make replicate" + ("" if tier == "default" else f" TIER={tier}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Scale(Strict):
    notes: str = ""
    preset: Optional[str] = None
    base: dict = Field(default_factory=dict)
    seeds: list[int] = Field(min_length=1)
    series: dict[str, dict] = Field(min_length=1)

    @field_validator("seeds")
    @classmethod
    def _nonneg(cls, v):
        if any(s < 0 for s in v):
            raise ValueError("seeds must be integers >= 0")
        return v

    @model_validator(mode="after")
    def _has_base(self):
        if not self.base and not self.preset:
            raise ValueError("needs a base (run config mapping) or a preset (file), or both")
        return self


class Row(BaseModel):
    """A table row: the series and model it shows, and the paper's value per column (extra keys
    must be the figure's columns; checked by check_references)."""
    model_config = ConfigDict(extra="allow")
    label: str
    series: str
    model: str = "0"
    source: str = ""
    unit: str = ""
    scales: Optional[list[str]] = None   # the scales whose runs the row shows (default: every scale)

    def at(self, scale: str) -> bool:
        return self.scales is None or scale in self.scales

    @field_validator("model", mode="before")
    @classmethod
    def _str(cls, v):
        return str(v)


class Reference(Strict):
    what: str
    source: str


class Figure(Strict):
    title: str
    source: str = ""
    kind: Literal[KINDS]
    tier: Literal[TIERS] = "default"
    notes: str = ""
    panels: Optional[list[str]] = None
    models: Optional[dict[str, str]] = None
    rows: Optional[list[Row]] = None
    columns: Optional[list[str]] = None
    reference: Optional[list[Reference]] = None
    x: Optional[Union[str, list[str]]] = None
    # series -> steps its curve is shifted by (it continues another run), or "@<series>": that series'
    # train.steps at the scale (a two-phase student after its teacher's phase 1, at every scale)
    offsets: Optional[dict[str, Union[int, str]]] = None
    scales: dict[str, Scale] = Field(min_length=1)

    @field_validator("offsets")
    @classmethod
    def _offsets(cls, v):
        for s, o in (v or {}).items():
            if isinstance(o, str) and not (o.startswith("@") and len(o) > 1):
                raise ValueError(f"{s!r}: a number of steps or '@<series>' (that series' train.steps)")
        return v

    @field_validator("models", mode="before")
    @classmethod
    def _str_models(cls, v):
        return {str(k): str(m) for k, m in v.items()} if isinstance(v, dict) else v


class Quantity(Strict):
    """One measured number of a regime check (analysis/regime.py)."""
    quantity: Literal[QUANTITIES]
    series: Optional[str] = None
    model: Optional[str] = None
    b: Optional[str] = None               # difference / speedup: the other series
    b_model: Optional[str] = None
    metric: Optional[str] = None
    step: Optional[int] = None            # value: at this step (default: the last evaluation)
    round: Optional[int] = Field(None, ge=1)  # value: at the end of this exchange round (round x the period)
    fraction: float = 0.25                # last_gain: over this last fraction of the run
    steps: Optional[int] = None           # gain_over: over this many steps
    target: Union[float, Literal["b_best", "b_final"]] = "b_best"
    figure: Optional[str] = None          # default: the claim's figure

    @field_validator("model", "b_model", mode="before")
    @classmethod
    def _str(cls, v):
        return None if v is None else str(v)

    @model_validator(mode="after")
    def _one_step(self):
        if self.step is not None and self.round is not None:
            raise ValueError("step and round exclude each other")
        return self


class RegimeCheck(Quantity):
    """A precondition of the paper's mechanism, written before the runs: the quantity (optionally
    relative to `over`) must be >= min and/or <= max, shown by the seeds' one-sided 95% bound, or a
    design fact the configuration fixes (analysis/regime.py: the one rule). `source` quotes or cites
    the paper's sentence, figure or table the check operationalises, and says where its threshold
    comes from ("threshold not from the paper: ..." when the paper gives none); required."""
    check: str
    source: str = Field(min_length=1)
    why: str = ""
    min: Optional[float] = None
    max: Optional[float] = None
    over: Optional[Quantity] = None

    @model_validator(mode="after")
    def _bound(self):
        if self.min is None and self.max is None:
            raise ValueError(f"regime check {self.check!r}: needs min, max or both")
        return self


class Sequential(Strict):
    """A group-sequential design (analysis/sequential.py), part of the claim's design: the seed
    counts at each planned look, the first the figure's declared seeds (checked against the figure
    at plan time), the later ones continued by sequential.continued."""
    looks: list[int] = Field(min_length=2)

    @field_validator("looks")
    @classmethod
    def _increasing(cls, v):
        if v[0] < MIN_LOOK:
            raise ValueError(f"every look needs at least {MIN_LOOK} seeds (fewer cannot decide); the first is {v[0]}")
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("the seed counts of the looks must increase strictly")
        return v


class CostRuns(Strict):
    """Runs of a regime at the embedded scale, priced at this CPU's measured quiet s/update for the
    workload, batch and precision (results/bench/efficiency.csv; benchmarks/regime_cost.py)."""
    workload: str            # efficiency.csv's workload: lm, cifar, imagenet, ctr, translation
    batch: int = Field(gt=0)   # per rank
    updates: int = Field(gt=0)
    ranks: int = Field(default=1, gt=0)
    runs: int = Field(default=1, gt=0)
    precision: Literal["fp32", "bf16"] = "fp32"   # train.precision of the runs
    # launch.allocator of the runs: "reuse" is priced at benchmarks/lm_levers.py's quiet rows (efficiency.csv
    # times the system allocator only, 1.5-1.8x slower for the LM at 8,192 and 16,384)
    allocator: Literal["system", "reuse"] = "system"


class FullRuns(Strict):
    """A full-scale figure's runs (the `--config scale=full` plan), `times` over, priced at the
    measured H200 rates (codist.budget) and, on 2 CPU cores, bounded by their FLOPs at the CPU's
    measured fp32 GEMM peak."""
    figure: str
    times: float = Field(default=1.0, gt=0)


class RegimeCost(Strict):
    """What a claim without an in-regime verdict would need: `needs` says which runs and why (the
    measured number that puts the regime there); `embedded` and `full` price them
    (benchmarks/regime_cost.py writes results/bench/regime_cost.csv; the claims table carries it).
    `bound: lower` where the regime's runs are only known from below (a batch not yet located)."""
    needs: str = Field(min_length=1)
    embedded: list[CostRuns] = Field(default_factory=list)
    full: list[FullRuns] = Field(default_factory=list)
    bound: Literal["estimate", "lower"] = "estimate"

    @model_validator(mode="after")
    def _priced(self):
        if not self.embedded and not self.full:
            raise ValueError("`embedded` runs or `full` figures to price")   # the location names regime_cost
        return self


class Claim(Strict):
    id: str = Field(pattern=ID)
    claim: str
    source: str = ""
    figure: str
    basis: Literal[BASES]
    measure: Literal[tuple(MEASURES)]
    metric: Optional[str] = None
    a: str
    b: str
    a_model: Optional[str] = None
    b_model: Optional[str] = None
    a2: Optional[str] = None
    b2: Optional[str] = None
    weight2: float = 1.0                    # final with a2/b2: [a - b] - weight2 x [a2 - b2] (a margin as a fraction of an effect)
    b_offset: Union[int, str] = 0           # speedup: steps added to b's; "@<series>": that series' train.steps
    at_least: Optional[float] = None
    within: Optional[float] = None
    target: Union[float, Literal["b_best", "b_final"]] = "b_best"   # speedup: the level both must reach
    paper: str = ""
    # the paper's effect in the claim's own oriented units (positive = as claimed; a speedup's ratio),
    # derived from `paper` where the paper gives numbers: the power column's effect (analysis/claims.py)
    paper_effect: Optional[float] = None
    regime: list[RegimeCheck] = Field(default_factory=list)
    full_scale_only: Optional[str] = None   # why no CPU-sized scale can test it
    identity: Optional[dict] = None         # comm_ratio: the papers' own periods (analysis/comm_identity.py)
    sequential: Optional[Sequential] = None   # opt-in: more seeds at planned looks (analysis/sequential.py)
    # a metric with no better direction (init_distance): which way the paper's claim points
    direction: Optional[Literal["higher", "lower"]] = None
    clock: Literal["step", "wall_s"] = "step"   # speedup: counted in updates or in training seconds
    not_run: Optional[str] = None           # why no scale of this harness runs it (a coverage row: the verdict says so)
    regime_cost: Optional[RegimeCost] = None   # a claim without an in-regime verdict: what its regime costs
    # per-scale replacements of the series a claim compares (the scales name their series differently,
    # e.g. k = 125 embedded for the paper's k = 250): {full: {a: "...", b: "..."}}; with their own
    # `regime:` there, else the claim's checks with the replaced series renamed (Claim.at)
    scales: dict[str, dict[Literal["a", "b", "a2", "b2", "a_model", "b_model", "b_offset", "regime", "sequential"],
                           object]] = \
        Field(default_factory=dict)

    def at(self, scale: str) -> "Claim":
        """The claim as it reads at `scale` (validated again with that scale's replacements). Without
        a `regime:` of the scale's own, the claim's checks stay, each series the override replaces
        (a, b, a2, b2) renamed where a check of the claim's figure names it."""
        override = self.scales.get(scale)
        if not override:
            return self
        doc = {**self.model_dump(exclude={"scales"}), **override}
        if "regime" not in override:
            rename = {getattr(self, k): override[k] for k in ("a", "b", "a2", "b2") if k in override}
            doc["regime"] = [_renamed(r, rename, self.figure) for r in self.model_dump()["regime"]]
        return Claim.model_validate(doc)

    @field_validator("a_model", "b_model", mode="before")
    @classmethod
    def _str(cls, v):
        return None if v is None else str(v)

    @field_validator("b_offset")
    @classmethod
    def _offset(cls, v):
        if isinstance(v, str) and not (v.startswith("@") and len(v) > 1):
            raise ValueError("a number of steps or '@<series>' (that series' train.steps)")
        return v

    @model_validator(mode="after")
    def _pairs(self):
        if bool(self.a2) != bool(self.b2):
            raise ValueError("a2 and b2 go together")
        if self.at_least is not None and self.within is not None:
            raise ValueError("at_least and within exclude each other")
        if self.sequential and self.measure == "comm_ratio":
            raise ValueError("sequential: a comm_ratio is exact (no seed statistics): more seeds decide nothing")
        return self

    @model_validator(mode="after")
    def _scales_read(self):
        """Each scale's override makes a valid claim (else Claim.at would fail later, unnamed)."""
        for scale in self.scales:
            try:
                self.at(scale)
            except ValidationError as e:
                raise ValueError("; ".join(".".join(map(str, ("scales", scale, *err["loc"]))) + ": "
                                           + err["msg"].removeprefix("Value error, ") for err in e.errors())) from None
        return self


def _renamed(check: dict, rename: dict, figure: str) -> dict:
    """A regime check (model_dump) with its series and `over`'s renamed; a quantity on another
    figure keeps its names (they are that figure's series)."""
    def one(q):
        if q is None or (q.get("figure") or figure) != figure:
            return q
        return {**q, **{k: rename.get(q[k], q[k]) for k in ("series", "b") if q.get(k) is not None}}
    out = one(check)
    return {**out, "over": one(check.get("over"))}


class Paper(Strict):
    paper: str
    source: str = ""
    figures: dict[str, Figure]
    claims: list[Claim] = Field(default_factory=list)


def _where(loc, doc) -> str:
    """A pydantic error location as a reader would look for it: the claim's id or the figure,
    then the YAML path of the key."""
    loc = list(loc)
    plain = ".".join(str(p) for p in loc)
    try:
        if loc[:1] == ["claims"] and isinstance(loc[1], int):
            head = f"claim {doc['claims'][loc[1]].get('id')!r} (claims.{loc[1]})"
        elif loc[:1] == ["figures"] and len(loc) > 1:
            head = f"figure {loc[1]!r}"
        else:
            return plain
    except (KeyError, IndexError, TypeError, AttributeError):
        return plain
    # the claim or figure itself (a rule across its keys, or not a mapping) has no key after its name
    return head + (", " + ".".join(map(str, loc[2:])) if loc[2:] else "")


def parse(doc, path) -> Paper:
    """The validated paper spec; errors name the file and every bad key in one message."""
    if isinstance(doc, dict):   # `x-...` keys hold YAML anchors (shared bases), nothing else
        doc = {k: v for k, v in doc.items() if not str(k).startswith("x-")}
    try:
        return Paper.model_validate(doc)
    except ValidationError as e:
        lines = [f"{path}: {_where(err['loc'], doc)}: " + _problem(err) for err in e.errors()]
        raise SpecError("\n".join(lines)) from None


def _problem(err) -> str:
    """One pydantic error as a reader needs it: what is wrong and what was expected."""
    if err["type"] == "extra_forbidden":
        return "unknown key (misspelt?)"
    if err["type"] == "missing":
        key = err["loc"][-1]
        if key == "source" and "regime" in err["loc"]:
            return ("missing: every regime check needs a source (the paper's sentence, figure or table it "
                    "operationalises, and where its threshold comes from)")
        return f"missing (a required key: {key!r})"
    if err["type"] == "value_error":   # our own rule: its message says what was expected
        msg = err["msg"].removeprefix("Value error, ")
        # a rule across keys (a mapping) names them itself; a rule on one value shows what was given
        return msg if isinstance(err.get("input"), dict) else f"{msg} (got {err.get('input')!r})"
    return f"{err['msg']} (got {err.get('input')!r})"


class SpecError(ValueError):
    """An experiments file that does not follow the schema; names the file and the key."""


def check_references(spec: Paper, path, scale: str, series_models: dict, metrics: dict,
                     planned: Optional[set] = None) -> list[str]:
    """Cross-references at one scale: `series_models[figure][series]` = the models its runs
    evaluate, `metrics[figure]` = the metrics its runs log; `planned`: the figures of the tier
    asked (default: every figure). Returns one line per problem."""
    errs = []
    planned = set(spec.figures) if planned is None else planned
    for fid, fig in spec.figures.items():
        if scale not in fig.scales or fid not in planned:
            continue
        have = series_models.get(fid, {})
        for i, row in enumerate(fig.rows or []):
            if not row.at(scale):
                continue
            where = f"{path}: figure {fid!r}, rows[{i}] ({row.label!r})"
            if row.series not in have:
                errs.append(f"{where}: series {row.series!r} is not a series of the figure; have {sorted(have)}")
            elif row.model not in have[row.series]:
                errs.append(f"{where}: model {row.model!r}; series {row.series!r} has {have[row.series]}")
            extra = sorted(set(row.model_extra or {}) - set(fig.columns or []) - {"scales"})
            if extra:
                errs.append(f"{where}: key(s) {extra} are not columns {fig.columns}")
        for s, m in (fig.models or {}).items():   # may name series of other scales too
            if s in have and m not in have[s]:
                errs.append(f"{path}: figure {fid!r}, models: {s!r} -> {m!r}; the series has {have[s]}")
        for s, o in (fig.offsets or {}).items():
            if s in have and isinstance(o, str) and o[1:] not in have:
                errs.append(f"{path}: figure {fid!r}, offsets: {s!r} -> {o!r}: series {o[1:]!r} does not exist; "
                            f"have {sorted(have)}")
    for c in spec.claims:
        if c.figure in spec.figures and c.figure not in planned:
            continue   # a claim of another tier's figure (TIERS): its runs are not planned
        errs += _claim_refs(c.at(scale), spec, path, scale, series_models, metrics)
    return errs


def _claim_refs(c: Claim, spec: Paper, path, scale, series_models, metrics) -> list[str]:
    where = f"{path}: claim {c.id!r}"
    if c.figure not in spec.figures:
        return [f"{where}: figure {c.figure!r} is not a figure of the paper; have {sorted(spec.figures)}"]
    fig = spec.figures[c.figure]
    if scale not in fig.scales or c.full_scale_only or c.not_run:
        return []
    errs = []
    have = series_models.get(c.figure, {})
    default = lambda s: (fig.models or {}).get(s, "0")   # noqa: E731
    for key, model_key in (("a", "a_model"), ("b", "b_model"), ("a2", None), ("b2", None)):
        s = getattr(c, key)
        if s is None:
            continue
        if s not in have:
            errs.append(f"{where}: figure {c.figure!r}, {key}: series {s!r} does not exist; have {sorted(have)}")
            continue
        m = (getattr(c, model_key) if model_key else None) or default(s)
        if m not in have[s]:
            errs.append(f"{where}: figure {c.figure!r}, {model_key or key}: model {m!r}; series {s!r} has {have[s]}")
    declared = len(fig.scales[scale].seeds)
    if c.sequential and c.sequential.looks[0] != declared:
        errs.append(f"{where}: sequential.looks: the first look is the figure's declared seeds ({declared} at scale "
                    f"{scale!r}); got {c.sequential.looks}")
    if isinstance(c.b_offset, str) and c.b_offset[1:] not in have:
        errs.append(f"{where}: figure {c.figure!r}, b_offset: series {c.b_offset[1:]!r} does not exist; have {sorted(have)}")
    if c.metric and c.measure == "final" and c.metric not in metrics.get(c.figure, set()):
        errs.append(f"{where}: figure {c.figure!r}, metric: {c.metric!r} is not logged by its runs; "
                    f"have {sorted(metrics.get(c.figure, set()))}")
    for i, r in enumerate(c.regime):
        for q, label in ((r, f"regime[{i}]"), (r.over, f"regime[{i}].over")):
            if q is None:
                continue   # a check without an `over` (the pair's last item)
            f = q.figure or c.figure
            if f not in spec.figures or scale not in spec.figures[f].scales:
                errs.append(f"{where}: {label} ({r.check!r}): figure {f!r} is not declared at scale {scale!r}")
                continue
            fh = series_models.get(f, {})
            for key in ("series", "b"):
                s = getattr(q, key)
                if s is not None and s not in fh:
                    errs.append(f"{where}: {label} ({r.check!r}): {key}: series {s!r} is not in figure {f!r}; "
                                f"have {sorted(fh)}")
            if q.metric and q.metric not in metrics.get(f, set()):
                errs.append(f"{where}: {label} ({r.check!r}): metric {q.metric!r} is not logged by figure {f!r}")
    return errs
