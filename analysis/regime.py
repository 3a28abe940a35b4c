"""Regime checks: the preconditions under which a paper's mechanism acts, declared per claim in
replications/<paper>/experiments.yaml (`regime:`, analysis/schema.py) before the runs, measured
here from the runs' curves and configs. Every quantity is one registered function below (QUANTITIES,
each with its doc); every check goes through one rule (`evaluate`).

Two kinds of quantity:
  design    read from a run's config (rounds, exchange period, epochs, the label-noise floor): a fact
            the configuration fixes before anything runs. The plan refuses a design fact outside its
            bounds (workflows/experiments.py, `snakemake -n`), and a claims row lists it as design,
            never as a passed check.
  measured  one value per seed, from that seed's own curves (a difference or a speedup pairs the two
            series on the seed).

The rule (issue 48: a regime is shown, never assumed). A measured check compares the seeds' mean with
its bound through the one-sided 95% t bounds of the seeds (stats.t_interval):
  shown            the bound lies inside the threshold (max: upper bound <= max; min: lower bound >= min)
  refuted          the bound lies outside it (max: lower bound > max; min: upper bound < min)
  not established  in between: the seeds cannot tell; the claim gets no verdict, and the row says about
                   how many more seeds would settle it at the measured sd
A check with `over` tests a size relative to another quantity o (an effect, a plateau): per seed the
contrast v - t |o| (|o| oriented by the sign of o's mean), whose mean is E[v] - t |E[o]|, so "v / |o| <= t"
is shown when the contrast's upper bound is <= 0 (for min: its lower bound >= 0); the row reads the
ratio of the means beside the contrast's bounds. A design `o` (a constant) scales the threshold.
A claim gets a verdict only when every check is shown (analysis/claims.py).
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from analysis import stats
from analysis.figure_data import higher_is_better, metric_column, model_rows, series_model

STATES = ("design", "shown", "refuted", "not established")
MAX_SEEDS_ASKED = 1000   # "about k more seeds": a search bound, not a plan


class RegimeError(ValueError):
    """A regime check that cannot be measured (the message names the check)."""


# ------------------------------------------------------------------ the registry

@dataclass(frozen=True)
class Quantity:
    name: str
    design: bool           # read from the config (a fact), else measured per seed
    fn: Callable

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.fn) or ""


QUANTITIES: dict[str, Quantity] = {}


def _quantity(name: str, design: bool = False):
    def add(fn):
        QUANTITIES[name] = Quantity(name, design, fn)
        return fn
    return add


def is_design(q) -> bool:
    """A check (or quantity) the configuration fixes: its quantity, and its `over` if any, are design."""
    if q.quantity not in QUANTITIES:
        raise RegimeError(f"unknown quantity {q.quantity!r}; have {sorted(QUANTITIES)}")
    over = getattr(q, "over", None)
    return QUANTITIES[q.quantity].design and (over is None or is_design(over))


@dataclass(frozen=True)
class Where:
    """What a quantity reads: its figure's manifest and curves, the series, model and metric (the
    quantity's own, else the claim's), and the other series `b` for a difference or a speedup."""
    manifest: dict
    curves: pd.DataFrame
    series: str
    model: str
    metric: str
    b: str | None
    b_model: str | None
    q: object

    def config(self, series: str | None = None) -> dict:
        s = series or self.series
        cfgs = self.manifest.get("configs") or {}
        if s not in cfgs:
            raise RegimeError(f"the figure's _runs.json has no config for series {s!r} (rerun snakemake)")
        return cfgs[s]

    def seed_curves(self, series: str | None = None, model: str | None = None) -> dict:
        """seed -> that seed's curve of the metric (step-indexed)."""
        rows = model_rows(self.curves, series or self.series, model or self.model)
        rows = rows.assign(_v=metric_column(rows, self.metric))
        return {seed: g.set_index("step")["_v"] for seed, g in rows.groupby("seed")}


def where(q, claim, tables) -> Where:
    manifest, curves = tables(q.figure or claim.figure)
    series = q.series or claim.a
    b = q.b or claim.b
    return Where(manifest, curves, series, q.model or series_model(manifest, series),
                 q.metric or claim.metric or (manifest.get("panels") or [None])[0],
                 b, q.b_model or (series_model(manifest, b) if b else None), q)


# ------------------------------------------------------------------ design quantities (the config)

# The real data sets' sizes (training examples, validation examples), by (workload, dataset,
# data_dir). A full-scale config still carries the embedded generator's train_size / val_size
# defaults, which say nothing about the files it reads, so these are used whenever the dataset is
# not "embedded". Sources: ImageNet (ILSVRC-2012) train/val counts, docs/full-scale.md and
# replications/presets/imagenet_resnet50_sodhani.yaml; its quarter (Sodhani Fig. 6) a quarter of
# each class, docs/full-scale.md; CIFAR-10/100: 50,000 training and 10,000 test images
# (Krizhevsky 2009, https://www.cs.toronto.edu/~kriz/cifar.html, linked from docs/full-scale.md);
# WMT'16 En-De: fairseq-preprocess's "train: 4500966 sents" and newstest2013's 3,000 sentences,
# docs/full-scale.md; IWSLT'14 De-En: about 160K training pairs (docs/full-scale.md; fairseq's
# prepare-iwslt14.sh: 160,239 train, 7,283 valid); Criteo: train.txt's 45,840,617 labelled lines
# (docs/full-scale.md: "about 45.8M"), minus the val_fraction held out.
DATA_SETS = {
    ("imagenet", "imagefolder", "imagenet"): (1_281_167, 50_000),
    ("imagenet", "imagefolder", "imagenet_quarter"): (1_281_167 / 4, 50_000),
    ("cifar", "cifar10", None): (50_000, 10_000),
    ("cifar", "cifar100", None): (50_000, 10_000),
    ("translation", "fairseq", "wmt16_en_de_bpe32k"): (4_500_966, 3_000),
    ("translation", "fairseq", "iwslt14_de_en"): (160_239, 7_283),
}
# LM text corpora in tokens (a run's examples are seq_len-token segments). Common Crawl: Anil et
# al.'s data set "containing 6 x 10^11 tokens" (their abstract, as the published summary quotes
# it); a smaller download repeats sooner (lm_data.TextStream warns when it does).
LM_CORPUS_TOKENS = {"common_crawl_wet": 6e11}
CRITEO_LINES = 45_840_617


def data_sizes(workload: dict) -> tuple[float, float]:
    """(training examples, validation examples) of a run's data: the embedded generator's own
    sizes, Fashion-MNIST's subset (its config's caps), or the real data set's (DATA_SETS,
    LM_CORPUS_TOKENS). The embedded LM's text is endless
    (each document seeded by its stream, row and index: lm_data.EmbeddedStream); a corpus is not."""
    name, ds = workload["name"], workload.get("dataset", "embedded")
    if name == "lm" and ds == "embedded":
        return math.inf, math.nan
    if name == "lm":
        tokens = LM_CORPUS_TOKENS.get(workload.get("data_dir"))
        if tokens is None:
            raise RegimeError(f"workload 'lm', data_dir {workload.get('data_dir')!r}: corpus size unknown "
                              f"(analysis/regime.py LM_CORPUS_TOKENS has {sorted(LM_CORPUS_TOKENS)})")
        return tokens / workload.get("seq_len", 32), math.nan
    if ds == "fashion_mnist":   # its sizes are caps the config always carries (cifar_config: a balanced subset)
        return workload["train_size"], workload["val_size"]
    if ds == "embedded":
        size = workload.get("train_size") or workload.get("pairs") or workload.get("train_examples")
        # translation's validation set is `val_pairs` (translation_config.py: no val_size)
        return size or math.nan, workload.get("val_size") or workload.get("val_pairs") or math.nan
    if name == "ctr" and ds == "criteo":
        lines = min(CRITEO_LINES, workload.get("max_lines") or CRITEO_LINES)
        held = 0 if workload.get("val_file") else workload.get("val_fraction", 0.1)
        return lines * (1 - held), (lines * held) or math.nan
    for key in ((name, ds, workload.get("data_dir")), (name, ds, None)):
        if key in DATA_SETS:
            return DATA_SETS[key]
    raise RegimeError(f"workload {name!r}, dataset {ds!r}, data_dir {workload.get('data_dir')!r}: size unknown "
                      f"(analysis/regime.py DATA_SETS has {sorted(k[2] or k[1] for k in DATA_SETS)})")


def _train_size(cfg: dict) -> float:
    size = data_sizes(cfg["workload"])[0]
    if math.isnan(size):
        raise RegimeError(f"workload {cfg['workload']['name']!r}: no training-set size in its config")
    a = cfg["algorithm"]
    return size / cfg["parallel"].get("models", 1) if a.get("data") == "disjoint" else size


def _period(cfg: dict) -> int:
    """The exchange period, from the config field the algorithm's registration names (its `period`)."""
    from codist.algorithms.registry import period_field
    a = cfg["algorithm"]
    try:
        field = period_field(a["name"])
    except KeyError as e:
        raise RegimeError(e.args[0]) from None
    if field is None or not a.get(field):
        raise RegimeError(f"algorithm {a['name']!r} has no exchange period (its registration names "
                          f"{'no period field' if field is None else f'{field!r}, not in this config'})")
    return int(a[field])


def _batch_per_model(cfg: dict) -> int:
    p = cfg["parallel"]
    return cfg["train"]["batch_per_rank"] * p["world_size"] // p.get("models", 1)


@_quantity("epochs", design=True)
def epochs(cfg: dict) -> float:
    """Passes of one model over its own training data (the embedded LM's generator never repeats a
    document: 0; real data sets, Common Crawl's text included: their true sizes, DATA_SETS, never the
    embedded generator's)."""
    return cfg["train"]["steps"] * _batch_per_model(cfg) / _train_size(cfg)


@_quantity("round_epochs", design=True)
def round_epochs(cfg: dict) -> float:
    """Passes over a model's own data between two exchanges (tau or k)."""
    return _period(cfg) * _batch_per_model(cfg) / _train_size(cfg)


@_quantity("rounds", design=True)
def rounds(cfg: dict) -> float:
    """Exchanges in the run: train.steps / the exchange period."""
    return cfg["train"]["steps"] / _period(cfg)


@_quantity("period_fraction", design=True)
def period_fraction(cfg: dict) -> float:
    """The exchange period as a fraction of the run's updates."""
    return _period(cfg) / cfg["train"]["steps"]


@_quantity("lr_wd_sum", design=True)
def lr_wd_sum(cfg: dict) -> float:
    """Sum over updates of lr x weight decay (how much L2 acts), under the run's schedule."""
    from codist.config import validate
    from codist.runtime.optim import lr_factor, weight_decay_at
    c = validate(cfg, source="regime lr_wd_sum")
    steps = c.train.steps
    changes = {int(k): float(v) for k, v in c.schedule.weight_decay_changes.items()}
    return float(sum(c.optimizer.lr * lr_factor(t, c.schedule, steps)
                     * weight_decay_at(t, c.optimizer.weight_decay, changes) for t in range(steps)))


@_quantity("label_noise_floor", design=True)
def label_noise_floor(cfg: dict) -> float:
    """The least mean cross-entropy (nats) a model reaches on the stand-in's noisy training labels
    without memorising the noise: the entropy of a label given its image, -(1-e) ln(1-e) - e ln(e/(K-1))
    for symmetric noise e over K classes (embedded_images.py: a label moves to one of the K - 1 others
    with probability e; the clean task is separable). 0 where no noise is injected (real data sets)."""
    w = cfg["workload"]
    if w.get("dataset", "embedded") != "embedded" or w["name"] not in ("cifar", "imagenet"):
        return 0.0
    if "label_noise" not in w or "classes" not in w:   # a resolved config (_runs.json, the plan) has both
        raise RegimeError(f"label_noise_floor: workload {w['name']!r} config has no label_noise / classes")
    e, k = float(w["label_noise"]), int(w["classes"])
    return 0.0 if e == 0 else float(-(1 - e) * math.log(1 - e) - e * math.log(e / (k - 1)))


def design_value(q, cfg: dict) -> float:
    """A design quantity of one run config."""
    if q.quantity not in QUANTITIES or not QUANTITIES[q.quantity].design:
        raise RegimeError(f"{q.quantity!r} is not a design quantity; have "
                          f"{sorted(n for n, d in QUANTITIES.items() if d.design)}")
    return float(QUANTITIES[q.quantity].fn(cfg))


# ------------------------------------------------------------------ measured quantities (per seed)

def _sign(metric) -> float:
    return 1.0 if higher_is_better(metric) else -1.0


def _at(curve: pd.Series, step: float) -> float:
    return float(np.interp(step, curve.index.to_numpy(float), curve.to_numpy(float)))


def _gain(curve: pd.Series, start: float, metric) -> float:
    return _sign(metric) * (float(curve.iloc[-1]) - _at(curve, start))


@_quantity("value")
def value(w: Where) -> pd.Series:
    """The metric at `step`, or at the end of exchange `round` (round x the series' period), default
    the last evaluation."""
    step = w.q.round * _period(w.config()) if w.q.round is not None else w.q.step
    return pd.Series({s: float(c.iloc[-1] if step is None else _at(c, step)) for s, c in w.seed_curves().items()})


@_quantity("last_gain")
def last_gain(w: Where) -> pd.Series:
    """Oriented improvement (positive = better) over the last `fraction` of the run: a plateaued
    curve gains little there."""
    return pd.Series({s: _gain(c, c.index.max() * (1 - w.q.fraction), w.metric) for s, c in w.seed_curves().items()})


@_quantity("gain_over")
def gain_over(w: Where) -> pd.Series:
    """Oriented improvement over the last `steps` updates (how far a curve still moves in its last
    evaluation interval, e.g. after its last LR decay)."""
    return pd.Series({s: _gain(c, c.index.max() - w.q.steps, w.metric) for s, c in w.seed_curves().items()})


def exchange_lags(curve: pd.Series, cfg: dict, metric) -> np.ndarray:
    """Oriented gain of `curve` (interpolated) from each exchange time e = burn_in + j k to e + k,
    for every exchange whose teacher serves a full period within the run: what the other model
    has learnt by the time its teacher (read at e) is replaced."""
    k, steps = _period(cfg), cfg["train"]["steps"]
    times = np.arange(int(cfg["algorithm"].get("burn_in") or 0), steps - k + 1, k, dtype=float)
    if not len(times):
        raise RegimeError(f"no full exchange period of {k} steps after burn-in in a run of {steps}")
    x, y = curve.index.to_numpy(float), curve.to_numpy(float)
    return _sign(metric) * (np.interp(times + k, x, y) - np.interp(times, x, y))


@_quantity("exchange_lag")
def exchange_lag(w: Where) -> pd.Series:
    """The largest oriented improvement of a seed's curve over one exchange period k, from each
    exchange time (burn_in + j k) to the next, over the whole run: how far the stalest teacher lags
    (worst right after burn-in, not in the last steps)."""
    cfg = w.config()
    return pd.Series({s: float(exchange_lags(c, cfg, w.metric).max()) for s, c in w.seed_curves().items()})


@_quantity("train_val_gap")
def train_val_gap(w: Where) -> pd.Series:
    """Final val_loss - train_loss (task loss): > 0 when the model overfits."""
    rows = model_rows(w.curves, w.series, w.model).groupby("seed").tail(1).set_index("seed")
    return (rows["val_loss"] - rows["train_loss"]).astype(float)


def _finals(w: Where, series: str, model: str) -> pd.Series:
    return pd.Series({s: float(c.iloc[-1]) for s, c in w.seed_curves(series, model).items()})


@_quantity("difference")
def difference(w: Where) -> pd.Series:
    """Oriented final(series) - final(b), paired on the seed."""
    if w.b is None:
        raise RegimeError("difference: no series b")
    return (_sign(w.metric) * (_finals(w, w.series, w.model) - _finals(w, w.b, w.b_model))).dropna()


def speedups(curves, a, am, b, bm, metric, target="b_best", b_offset=0, clock="step") -> pd.DataFrame:
    """Per seed: steps of b and of a to reach the target level (None = never: censored) and
    their ratio. `target`: a number, "b_best" (the least of b's per-seed best values, a level
    every b seed reaches) or "b_final" (the least of b's per-seed final values). `clock`: the
    column counted, "step" or "wall_s" (the run's training seconds at each evaluation)."""
    higher = higher_is_better(metric)
    ra, rb = model_rows(curves, a, am), model_rows(curves, b, bm)
    vb = metric_column(rb, metric)
    if target in ("b_best", "b_final"):
        g = vb.groupby(rb["seed"])
        per_seed = (g.max() if higher else g.min()) if target == "b_best" else g.last()
        level = float(per_seed.min() if higher else per_seed.max())
    else:
        level = float(target)
    out = []
    for seed in sorted(set(ra["seed"]) & set(rb["seed"])):
        sa, sb = ra[ra["seed"] == seed], rb[rb["seed"] == seed]
        ta = stats.steps_to(sa[clock], metric_column(sa, metric), level, higher)
        tb = stats.steps_to(sb[clock], metric_column(sb, metric), level, higher)
        bound = (tb + b_offset) / float(sa[clock].max()) if tb is not None else math.nan
        out.append({"seed": seed, "steps_a": ta, "steps_b": tb, "target": level, "censored_bound": bound,
                    "ratio": (tb + b_offset) / ta if ta and tb is not None else math.nan})
    return pd.DataFrame(out).set_index("seed")


@_quantity("speedup")
def speedup(w: Where) -> pd.Series:
    """Per seed: b's steps / the series' steps to reach `target` (interpolated); a seed that never
    reaches it counts at its bound, b's steps / the series' run length (above its true ratio)."""
    r = speedups(w.curves, w.series, w.model, w.b, w.b_model, w.metric, w.q.target)
    return r["ratio"].fillna(r["censored_bound"])


@_quantity("critical_ratio")
def critical_ratio(w: Where) -> pd.Series:
    """Sync SGD's steps to `target` at batch b (`b`) over those at 2b (`series`: two workers' batches
    folded into one rank's), per seed: 2 = perfect scaling, 1 = saturated (doubling gains nothing; at
    McCandlish et al.'s B_crit a doubling still gains 1.33x, so a bound near 1 tests saturation, not
    B_crit). A censored seed counts at its bound, above its true ratio."""
    _doubled_batch(w.config(), w.series, w.config(w.b), w.b)
    return speedup(w)


def _doubled_batch(c2: dict, s2: str, c1: dict, s1: str) -> None:
    """critical_ratio compares sync SGD with itself at twice the batch per model: refuse anything else."""
    for cfg, s in ((c2, s2), (c1, s1)):
        if cfg["algorithm"]["name"] != "allreduce" or cfg["parallel"].get("models", 1) != 1:
            raise RegimeError(f"critical_ratio: series {s!r} is not sync SGD of one model "
                              f"(algorithm {cfg['algorithm']['name']!r})")
    if _batch_per_model(c2) != 2 * _batch_per_model(c1):
        raise RegimeError(f"critical_ratio: series {s2!r} has {_batch_per_model(c2)} examples per update, "
                          f"not twice series {s1!r}'s {_batch_per_model(c1)}")


# ------------------------------------------------------------------ reading a quantity

def per_seed(q, claim, tables) -> pd.Series:
    """seed -> a measured quantity `q` of `claim` (`tables(fig)` returns (manifest, curves))."""
    if q.quantity not in QUANTITIES:
        raise RegimeError(f"unknown quantity {q.quantity!r}; have {sorted(QUANTITIES)}")
    if QUANTITIES[q.quantity].design:
        raise RegimeError(f"{q.quantity!r} is read from the config, not per seed")
    return QUANTITIES[q.quantity].fn(where(q, claim, tables)).astype(float)


def design_of(q, claim, tables) -> float:
    """A design quantity `q` of `claim`'s series, from its figure's config."""
    return design_value(q, where(q, claim, tables).config())


def measure(q, claim, figures_dir, tables) -> float:
    """The value of one quantity `q` (schema.Quantity) for `claim`: a design value, or the mean over
    seeds of a measured one (what a row reads; the check itself uses the seeds: `evaluate`)."""
    if QUANTITIES.get(q.quantity) and QUANTITIES[q.quantity].design:
        return design_of(q, claim, tables)
    return float(per_seed(q, claim, tables).mean())


# ------------------------------------------------------------------ the one check rule

@dataclass(frozen=True)
class Result:
    """One check's outcome. `value`: the quantity (a ratio of means with `over`); `low`/`high`: the
    one-sided 95% bounds of what is tested against the threshold (the quantity itself, or with a
    measured `over` the contrast v - t|o|, whose threshold is 0); `state`: one of STATES."""
    check: str
    state: str
    design: bool
    value: float
    requirement: str
    n: int = 0
    low: float = math.nan
    high: float = math.nan
    tested: str = ""       # what low/high bound ("" = the quantity itself)
    settle: str = ""

    def measured_text(self) -> str:
        if self.design:
            return f"{self.value:.4g}"
        bounds = f"[{self.low:.4g}, {self.high:.4g}] over {self.n} seeds" if self.n > 1 else f"{self.n} seed(s): no bound"
        return f"{self.value:.4g}" + (f" ({self.tested}: {bounds})" if self.tested else f" {bounds}")

    def text(self) -> str:
        """'check: measured (requirement): state' as the claims row shows it."""
        return f"{self.check}: {self.measured_text()} ({self.requirement}): {self.state}"

    def reason(self) -> str:
        """Why a claim gets no verdict: the check, its numbers against the threshold, and for a check
        not established how many more seeds would settle it."""
        return (f"{self.check}: {self.measured_text()} vs {self.requirement}"
                + (" (design)" if self.design else "") + (f"; {self.settle}" if self.settle else ""))


def _design_ratio(r, value_of) -> float:
    """A design check's value: its quantity, over its `over`'s size when it has one."""
    return value_of(r) / (abs(value_of(r.over)) if r.over is not None else 1.0)


def _inside(r, v: float) -> bool:
    """A design fact's value within the check's bounds."""
    return (r.min is None or v >= r.min) and (r.max is None or v <= r.max) and not math.isnan(v)


def _requirement(r) -> str:
    return " and ".join(([f">= {r.min:g}"] if r.min is not None else []) + ([f"<= {r.max:g}"] if r.max is not None else []))


def seeds_to_settle(n: int, mean: float, sd: float) -> int | None:
    """The least number of seeds whose one-sided 95% bound, at this mean and sd, lies on the mean's
    side of 0 (the threshold of a contrast): what would settle a check either way. None: never (a mean
    of exactly 0) or more than MAX_SEEDS_ASKED."""
    if not (sd > 0) or mean == 0 or math.isnan(mean):
        return None
    for m in range(max(n, 2), MAX_SEEDS_ASKED + 1):
        if stats.t_quantile(m) * sd / math.sqrt(m) < abs(mean):
            return m
    return None


def _state(low: float, high: float, side: str) -> str:
    """A bound's state for a contrast (the quantity minus its threshold): a min needs it >= 0, a max <= 0."""
    if math.isnan(low) or math.isnan(high):
        return "not established"
    if side == "min":
        return "shown" if low >= 0 else "refuted" if high < 0 else "not established"
    return "shown" if high <= 0 else "refuted" if low > 0 else "not established"


def evaluate(r, claim, tables) -> Result:
    """One regime check under the module's rule."""
    req = _requirement(r)
    try:
        if is_design(r):
            v = _design_ratio(r, lambda q: design_of(q, claim, tables))
            return Result(r.check, "design" if _inside(r, v) else "refuted", True, v, req)
        v = per_seed(r, claim, tables)
        o = None if r.over is None else (design_of(r.over, claim, tables) if is_design(r.over)
                                         else per_seed(r.over, claim, tables))
    except (KeyError, ValueError) as e:
        raise RegimeError(f"regime check {r.check!r}: {e}") from None
    sides = [(side, t) for side, t in (("min", r.min), ("max", r.max)) if t is not None]
    if isinstance(o, pd.Series):   # a measured `over`: per seed, the contrast v - t |o| against 0
        both = pd.concat({"v": v, "o": o}, axis=1).dropna()
        sign = 1.0 if both["o"].mean() >= 0 else -1.0
        value = float(both["v"].mean() / abs(both["o"].mean())) if both["o"].mean() else math.nan
        contrast = [(side, stats.t_interval(both["v"] - t * sign * both["o"])) for side, t in sides]
        (side, t), display = sides[0], contrast[0][1]
        low, high, n = display.low, display.high, len(both)
        tested = f"per seed v - {t:g} x |o|, needs {'>=' if side == 'min' else '<='} 0"
    else:   # the quantity itself (over a constant: scaled), its bounds against the threshold
        iv = stats.t_interval(v / (1.0 if o is None else abs(o)))
        value, low, high, tested, n = iv.mean, iv.low, iv.high, "", iv.n
        contrast = [(side, stats.Interval(iv.n, iv.mean - t, iv.sd, iv.low - t, iv.high - t, iv.method))
                    for side, t in sides]
    states, settle = [], []
    for side, iv in contrast:
        states.append(_state(iv.low, iv.high, side))
        if states[-1] == "not established":
            m = seeds_to_settle(iv.n, iv.mean, iv.sd)
            settle.append(f"about {m - iv.n} more seeds would settle it at the measured sd ({iv.sd:.3g})" if m
                          else "a single seed has no bound" if iv.n < 2
                          else f"more than {MAX_SEEDS_ASKED:,} seeds would settle it at the measured sd ({iv.sd:.3g})"
                          if iv.sd > 0 and iv.mean != 0 else "no number of seeds would settle it: the mean sits on the bound")
    state = "refuted" if "refuted" in states else "not established" if "not established" in states else "shown"
    return Result(r.check, state, False, value, req, int(n), low, high, tested, "; ".join(dict.fromkeys(settle)))


def run_checks(claim, figures_dir, tables) -> list[Result]:
    """Every regime check of `claim`, in its declared order."""
    return [evaluate(r, claim, tables) for r in claim.regime]


def design_facts(claim, config_of) -> list[tuple[str, float, bool]]:
    """(check, value, inside its bounds) of every design fact of `claim`, from `config_of(figure, series)`
    (the plan's resolved configs, before any run: workflows/experiments.py)."""
    def val(q):
        return design_value(q, config_of(q.figure or claim.figure, q.series or claim.a))
    out = []
    for r in claim.regime:
        if is_design(r):
            v = _design_ratio(r, val)
            out.append((r.check, v, _inside(r, v)))
    return out
