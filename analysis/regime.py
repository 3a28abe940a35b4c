"""Regime checks: the preconditions under which a paper's mechanism acts, declared per claim in
replications/<paper>/experiments.yaml (`regime:`, analysis/schema.py) before the runs, measured
here from the runs' curves and configs.

Quantities (curves: mean over seeds; "oriented": positive = better in the metric's direction):
  value            the metric at `step`, or at the end of exchange `round` (round x the series'
                   period), default the last evaluation
  last_gain        oriented improvement of the mean curve over the last `fraction` of the run
                   (a plateaued baseline gains far less than the claimed effect)
  gain_over        oriented improvement over the last `steps` updates (how far a teacher read
                   `steps` ago lags the student)
  exchange_lag     the largest oriented improvement of the mean curve over one exchange period k,
                   from each exchange time (burn_in + j k) to the next, over the whole run: how
                   far the stalest teacher lags (worst right after burn-in, not in the last steps)
  critical_ratio   sync SGD's steps to `target` at batch b (`b`) over those at 2b (`series`: two
                   workers' batches folded into one rank's), mean over seeds: 2 = perfect scaling,
                   1 = saturated (doubling gains nothing; at McCandlish et al.'s B_crit a doubling
                   still gains 1.33x, so a bound near 1 tests saturation, not B_crit)
  difference       oriented final(series) - final(b)
  speedup          mean over seeds of b's steps / series' steps to reach `target` (interpolated)
  train_val_gap    final val_loss - train_loss (task loss): > 0 when the model overfits
  epochs           passes of one model over its own training data (the embedded LM's generator
                   never repeats a document: 0; real data sets, Common Crawl's text included:
                   their true sizes, DATA_SETS, never the embedded generator's)
  round_epochs     passes over a model's own data between two exchanges (tau or k)
  rounds           exchanges in the run
  period_fraction  exchange period / run length
  lr_wd_sum        sum over updates of lr x weight decay (how much L2 acts)

A check with `noise: true` (last_gain, gain_over, value; `over` only a value's, as a ratio) is a
test at its seeds' noise: the quantity is measured per seed (a ratio: per seed, over the same seed's
`over`) and the check fails only when the one-sided 95% t bound of the seeds is past the bound (a
max: the lower bound above it; a min: the upper bound below it), so a gate cannot fail on seed noise
alone (issue 41: Table 1's convergence check read 0.0008 on one seed set and 0.0024 on another
against 0.001; Sun's plateau ratio 0.907 at K = 4 came from per-seed ratios 0.86, 0.86, 1.00).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis import stats
from analysis.figure_data import finals, higher_is_better, metric_column, model_rows, series_model

CONFIG_QUANTITIES = ("epochs", "round_epochs", "rounds", "period_fraction", "lr_wd_sum")


class RegimeError(ValueError):
    """A regime check that cannot be measured (the message names the check)."""


def _mean_curve(curves, series, model, metric) -> pd.Series:
    rows = model_rows(curves, series, model).assign(_v=lambda d: metric_column(d, metric))
    return rows.groupby("step")["_v"].mean()


def _seed_curves(curves, series, model, metric) -> dict:
    """seed -> that seed's curve of `metric` (step-indexed)."""
    rows = model_rows(curves, series, model).assign(_v=lambda d: metric_column(d, metric))
    return {seed: g.set_index("step")["_v"] for seed, g in rows.groupby("seed")}


def _gain(c: pd.Series, q, metric) -> float:
    """last_gain / gain_over of one curve (oriented: positive = better)."""
    end = c.index.max()
    start = end * (1 - q.fraction) if q.quantity == "last_gain" else end - q.steps
    return _sign(metric) * (float(c.iloc[-1]) - _at(c, start))


def _at(curve: pd.Series, step: float) -> float:
    return float(np.interp(step, curve.index.to_numpy(float), curve.to_numpy(float)))


def _sign(metric) -> float:
    return 1.0 if higher_is_better(metric) else -1.0


def _config(manifest: dict, series: str) -> dict:
    cfgs = manifest.get("configs") or {}
    if series not in cfgs:
        raise RegimeError(f"the figure's _runs.json has no config for series {series!r} (rerun snakemake)")
    return cfgs[series]


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
    sizes, or the real data set's (DATA_SETS, LM_CORPUS_TOKENS). The embedded LM's text is endless
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


def lr_wd_sum(cfg: dict) -> float:
    from codist.config import validate
    from codist.rank.optim import lr_factor, weight_decay_at
    c = validate(cfg, source="regime lr_wd_sum")
    steps = c.train.steps
    changes = {int(k): float(v) for k, v in c.schedule.weight_decay_changes.items()}
    return float(sum(c.optimizer.lr * lr_factor(t, c.schedule, steps)
                     * weight_decay_at(t, c.optimizer.weight_decay, changes) for t in range(steps)))


def config_quantity(q, cfg: dict) -> float:
    steps = cfg["train"]["steps"]
    if q.quantity == "epochs":
        return steps * _batch_per_model(cfg) / _train_size(cfg)
    if q.quantity == "round_epochs":
        return _period(cfg) * _batch_per_model(cfg) / _train_size(cfg)
    if q.quantity == "rounds":
        return steps / _period(cfg)
    if q.quantity == "period_fraction":
        return _period(cfg) / steps
    if q.quantity == "lr_wd_sum":
        return lr_wd_sum(cfg)
    raise RegimeError(f"unknown config quantity {q.quantity!r}")


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


def _doubled_batch(c2: dict, s2: str, c1: dict, s1: str) -> None:
    """critical_ratio compares sync SGD with itself at twice the batch per model: refuse anything else."""
    for cfg, s in ((c2, s2), (c1, s1)):
        if cfg["algorithm"]["name"] != "allreduce" or cfg["parallel"].get("models", 1) != 1:
            raise RegimeError(f"critical_ratio: series {s!r} is not sync SGD of one model "
                              f"(algorithm {cfg['algorithm']['name']!r})")
    if _batch_per_model(c2) != 2 * _batch_per_model(c1):
        raise RegimeError(f"critical_ratio: series {s2!r} has {_batch_per_model(c2)} examples per update, "
                          f"not twice series {s1!r}'s {_batch_per_model(c1)}")


def measure(q, claim, figures_dir, tables) -> float:
    """The value of one quantity `q` (schema.Quantity) for `claim`; `tables(fig)` returns
    (manifest, curves) of a figure."""
    fig = q.figure or claim.figure
    manifest, curves = tables(fig)
    series = q.series or claim.a
    if q.quantity in CONFIG_QUANTITIES:
        return config_quantity(q, _config(manifest, series))
    metric = q.metric or claim.metric or (manifest.get("panels") or [None])[0]
    model = q.model or series_model(manifest, series)
    if q.quantity == "value":
        c = _mean_curve(curves, series, model, metric)
        step = q.round * _period(_config(manifest, series)) if q.round is not None else q.step
        return float(c.iloc[-1] if step is None else _at(c, step))
    if q.quantity in ("last_gain", "gain_over"):
        return _gain(_mean_curve(curves, series, model, metric), q, metric)
    if q.quantity == "exchange_lag":
        lags = exchange_lags(_mean_curve(curves, series, model, metric), _config(manifest, series), metric)
        return float(lags.max())
    if q.quantity == "train_val_gap":
        rows = model_rows(curves, series, model).groupby("seed").tail(1)
        return float((rows["val_loss"] - rows["train_loss"]).mean())
    b = q.b or claim.b
    bm = q.b_model or series_model(manifest, b)
    if q.quantity == "difference":
        return float((_sign(metric) * (finals(curves, series, model, metric) - finals(curves, b, bm, metric))).mean())
    if q.quantity in ("speedup", "critical_ratio"):
        if q.quantity == "critical_ratio":
            _doubled_batch(_config(manifest, series), series, _config(manifest, b), b)
        r = speedups(curves, series, model, b, bm, metric, q.target)
        return float(r["ratio"].fillna(r["censored_bound"]).mean())
    raise RegimeError(f"unknown quantity {q.quantity!r}")


NOISE_QUANTITIES = ("last_gain", "gain_over", "value")   # measured per seed (schema.RegimeCheck.noise)


def per_seed(q, claim, tables) -> pd.Series:
    """seed -> the quantity `q` (last_gain, gain_over or value) on that seed's own curve."""
    if q.quantity not in NOISE_QUANTITIES:
        raise RegimeError(f"noise: per-seed values of {q.quantity!r} are not measured {NOISE_QUANTITIES}")
    manifest, curves = tables(q.figure or claim.figure)
    series = q.series or claim.a
    metric = q.metric or claim.metric or (manifest.get("panels") or [None])[0]
    model = q.model or series_model(manifest, series)
    seeds = _seed_curves(curves, series, model, metric)
    if q.quantity != "value":
        return pd.Series({s: _gain(c, q, metric) for s, c in seeds.items()})
    step = q.round * _period(_config(manifest, series)) if q.round is not None else q.step
    return pd.Series({s: float(c.iloc[-1] if step is None else _at(c, step)) for s, c in seeds.items()})


def noise_check(r, claim, tables) -> tuple[bool, str, str]:
    """A check at its seeds' noise (module docstring): fails only when the seeds' one-sided 95% bound
    is past the bound."""
    try:
        v = per_seed(r, claim, tables)
        if r.over is not None:   # a ratio per seed, over the same seed's `over`
            v = (v / per_seed(r.over, claim, tables).abs()).dropna()
        iv = stats.t_interval(v)
    except (KeyError, ValueError) as e:
        raise RegimeError(f"regime check {r.check!r}: {e}") from None
    req = " and ".join(([f">= {r.min:g}"] if r.min is not None else []) + ([f"<= {r.max:g}"] if r.max is not None else []))
    ok = ((r.min is None or iv.high >= r.min) and (r.max is None or iv.low <= r.max)
          and not math.isnan(iv.low) and not math.isnan(iv.high))
    got = f"{iv.mean:.4g} [{iv.low:.4g}, {iv.high:.4g}] over {iv.n} seeds"
    return (ok, f"{r.check}: {got} ({req} unless the seeds' one-sided 95% bound is past it) {'pass' if ok else 'FAIL'}",
            f"{r.check} ({got} vs {req}: past it at 95%)")


def check(r, claim, figures_dir, tables) -> tuple[bool, str, str]:
    """(passed, "check: measured vs required", failure text) of one regime check."""
    if r.noise:
        return noise_check(r, claim, tables)
    try:
        v = measure(r, claim, figures_dir, tables)
        if r.over is not None:   # a size relative to an effect: the effect's size, whatever its sign
            v = v / abs(measure(r.over, claim, figures_dir, tables))
    except (KeyError, ValueError) as e:
        raise RegimeError(f"regime check {r.check!r}: {e}") from None
    req = " and ".join(([f">= {r.min:g}"] if r.min is not None else []) + ([f"<= {r.max:g}"] if r.max is not None else []))
    ok = (r.min is None or v >= r.min) and (r.max is None or v <= r.max) and not math.isnan(v)
    return ok, f"{r.check}: {v:.4g} ({req}) {'pass' if ok else 'FAIL'}", f"{r.check} ({v:.4g} vs {req})"


def run_checks(claim, figures_dir, tables) -> tuple[str, list[str]]:
    """The regime column ('; '-joined) and the failed checks' texts."""
    results = [check(r, claim, figures_dir, tables) for r in claim.regime]
    return "; ".join(t for _, t, _ in results), [f for ok, _, f in results if not ok]
