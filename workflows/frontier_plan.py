"""replications/frontier/frontier.yaml -> the frontier's points: one run config per workload,
method, period and seed (torch-free: the Snakemake plan imports it).

A workload names a regime, a figure of a paper's experiments file; its scale's base (and, for a
point that names one, a series of that figure) is the starting config, so the run length, data,
model and optimizer are the paper's and a point equal to a paper's run has its run id. A point's
dotted overrides (workflows/experiments.py semantics) come on top. Labels are derived from the
resolved config and the algorithm's registration (its label and knob, codist.algorithms.registry),
never written by hand; the spec's `methods` table names only a method's result model.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codist.algorithms import registry as algorithm_registry
from codist.config import RunConfig, to_dict
from workflows.experiments import ExperimentsError, Plan, resolve, scale_base, set_dotted


class FrontierError(ValueError):
    """A frontier spec that cannot be planned; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Method(_Strict):
    model: str = "0"                 # the model of a run that is the method's result
    model_at_round_end: str | None = None   # ... instead, when the run's last update ends a period


class Regime(_Strict):
    paper: str
    figure: str


class Workload(_Strict):
    title: str
    regime: Regime
    seeds: list[int] = Field(min_length=3)    # intervals need >= 3 seeds (analysis/stats.py)
    points: list[dict] = Field(min_length=2)
    left_out: list[str] = Field(default_factory=list)


class Spec(_Strict):
    source: str
    scale: str
    bandwidths_gbps: list[float] = Field(min_length=1)
    methods: dict[str, Method] = Field(default_factory=dict)   # a method not listed: its model "0"
    workloads: dict[str, Workload] = Field(min_length=1)


@dataclass(frozen=True)
class Point:
    workload: str
    label: str           # e.g. "codistill k=25"
    algorithm: str
    knob: str | None
    period: int | None
    model: str
    seed: int
    run_id: str
    config: RunConfig


def read_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
        return Spec.model_validate({k: v for k, v in doc.items() if not str(k).startswith("x-")})
    except (OSError, yaml.YAMLError) as e:
        raise FrontierError(f"{path}: {e}") from None
    except ValidationError as e:
        raise FrontierError(f"{path}: {e}") from None


def regime_start(replications: Path, regime: Regime, scale: str, where: str) -> tuple[dict, dict]:
    """(the regime figure's base config at `scale`, its series -> dotted overrides)."""
    path = replications / regime.paper / "experiments.yaml"
    try:
        sc = yaml.safe_load(path.read_text())["figures"][regime.figure]["scales"][scale]
    except (OSError, KeyError, TypeError) as e:
        raise FrontierError(f"{where}: regime {regime.paper} {regime.figure} has no scale {scale!r} "
                            f"in {path} ({e!r})") from None
    try:
        return scale_base(sc, path, where), sc["series"]
    except ExperimentsError as e:
        raise FrontierError(str(e)) from None


def ordered(overrides: dict) -> dict:
    """Whole sections first, then dotted keys, so `algorithm.tau` lands in a replaced `algorithm`."""
    return dict(sorted(overrides.items(), key=lambda kv: "." in str(kv[0])))


def label_of(cfg: RunConfig, methods: dict[str, Method]) -> tuple[str, str | None, int | None, str]:
    """(label, knob, period, result model) of a resolved config: the label, the knob's symbol and
    field from the algorithm's registration (its `knob`, else its exchange period unnamed), the
    result model from the spec's `methods` (default "0")."""
    spec = algorithm_registry.spec(cfg.algorithm.name)
    symbol, field = spec.knob or (None, spec.period)
    period = getattr(cfg.algorithm, field) if field else None
    m = methods.get(cfg.algorithm.name, Method())
    model = m.model_at_round_end if m.model_at_round_end and period and cfg.train.steps % period == 0 else m.model
    return spec.label_for(cfg.algorithm), symbol, period, model


def load_points(spec_path: str | Path, replications: str | Path, scale: str) -> tuple[Spec, list[Point]]:
    """Every (workload, point, seed) of the spec at `scale` (none if the spec is for another scale)."""
    spec, replications = read_spec(spec_path), Path(replications)
    if spec.scale != scale:
        return spec, []
    points = []
    for wname, w in spec.workloads.items():
        base, series = regime_start(replications, w.regime, scale, f"{spec_path}: {wname}")
        labels = {}
        for i, raw in enumerate(w.points):
            where = f"{spec_path}: {wname}, points[{i}]"
            raw = dict(raw)
            start = copy.deepcopy(base)
            if "series" in raw:
                name = raw.pop("series")
                if name not in series:
                    raise FrontierError(f"{where}: series {name!r} is not in {w.regime.paper} {w.regime.figure} "
                                        f"(has: {', '.join(series)})")
                for key, value in ordered(series[name]).items():
                    set_dotted(start, key, value, where)
            for seed in w.seeds:
                try:
                    cfg = resolve(start, ordered(raw), seed, scale, f"{where}, seed {seed}")
                except ExperimentsError as e:
                    raise FrontierError(str(e)) from None
                if cfg.parallel.world_size != 2:
                    raise FrontierError(f"{where}: parallel.world_size={cfg.parallel.world_size}; the frontier's "
                                        f"layout is 2 ranks, one per group")
                label, knob, period, model = label_of(cfg, spec.methods)
                if labels.setdefault((label, seed), i) != i:
                    raise FrontierError(f"{where}: {label!r} is also points[{labels[(label, seed)]}]")
                points.append(Point(wname, label, cfg.algorithm.name, knob, period, model, seed,
                                    cfg.run_id(), cfg))
    return spec, points


def _in_checkout(declared: str) -> str:
    """A paper figure's "<experiments.yaml>: ..." with the path from the checkout's root, not this
    machine's (it goes into the committed tables)."""
    root = f"{Path(__file__).resolve().parents[1]}/"
    return declared[len(root):] if declared.startswith(root) else declared


def add_to_plan(plan: Plan, points: list[Point]) -> dict[str, str]:
    """Put the points' configs into the workflow's plan (so its run rules train them); a run a
    paper already declares must be the same config. Returns run id -> the paper figure sharing it."""
    shared = {}
    for p in points:
        if p.run_id in plan.configs:
            if to_dict(plan.configs[p.run_id]) != to_dict(p.config):
                raise FrontierError(f"run {p.run_id} ({p.workload} {p.label}) differs in name/launch from "
                                    f"{plan.declared_by[p.run_id]}")
            shared.setdefault(p.run_id, _in_checkout(plan.declared_by[p.run_id]))
        else:
            plan.configs[p.run_id] = p.config
            plan.declared_by[p.run_id] = f"frontier {p.workload} {p.label}, seed {p.seed}"
    return shared


def runs_manifest(spec: Spec, points: list[Point], workload: str, results: str, shared: dict[str, str]) -> dict:
    """The `<workload>_runs.json` analysis/frontier_table.py reads: every point's run directory."""
    w = spec.workloads[workload]
    return {
        "workload": workload, "title": w.title, "source": spec.source,
        "regime": f"{w.regime.paper} {w.regime.figure}", "bandwidths_gbps": spec.bandwidths_gbps,
        "left_out": w.left_out,
        "runs": [{"label": p.label, "algorithm": p.algorithm, "knob": p.knob, "period": p.period,
                  "model": p.model, "seed": p.seed, "run_id": p.run_id,
                  "run_dir": f"{results}/{p.config.scale}/runs/{p.run_id}",
                  "shared_with": shared.get(p.run_id, "")}
                 for p in points if p.workload == workload],
    }


def runs_manifest_text(*args) -> str:
    return json.dumps(runs_manifest(*args), indent=2) + "\n"
