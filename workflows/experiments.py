"""`replications/<paper>/experiments.yaml` -> the plan of runs one scale needs.

Each paper declares which runs make which figure at which scale:

    paper: anil2018                      # must equal the folder name
    source: "..."                        # the paper itself
    claims: [...]                        # read by analysis/claims.py (see there), each with
                                         # its regime checks (analysis/regime.py)
    figures:
      fig1:                              # figure id: file names derive from it
        title: "..."
        source: "Fig. 1a/1b"             # what in the paper it mirrors
        kind: curves                     # how it is drawn (see KINDS)
        notes: "..."                     # optional free text
        panels: [val_loss]               # optional, for the analysis: metric per panel (curves)
        models: {"ensemble": ensemble}   # optional: series -> model whose rows it shows
        rows: [...]                      # table: paper-vs-ours rows (analysis/figure_data.py)
        reference: [...]                 # optional: the paper's numbers, each with its source
        scales:
          embedded:
            notes: "..."                 # optional
            preset: presets/x.yaml       # optional: a run config file (relative to replications/)
            base: {workload: {...}, ...} # a run config mapping, merged over the preset
            seeds: [0, 1]
            series:                      # label -> dotted overrides of base
              "sync, 2 workers": {parallel.world_size: 2, optimizer.lr: 0.1}

A claim with `sequential: {looks: [...]}` (analysis/sequential.py) may need more seeds than its
figure declares: the results root's state (<results>/<scale>/<paper>/sequential.csv, from the claims
analysis) says how many, and the figure's list is continued to that many (sequential.continued);
its manifest then names the declared ones (`declared_seeds`), which every other claim reads.

Every (series, seed) resolves to a run config validated by `codist.config.validate`; its
run id (`codist.config.run_id`) names the run, so a run declared by several figures is
planned, and trained, once. Only the requested scale is resolved: a scale whose configs
do not validate yet (e.g. `full` naming a workload that has not landed) is an error only
when that scale is asked for, and the error names the paper, figure, scale and series.

The whole file is checked against one schema (analysis/schema.py, unknown keys refused) and its
names against each other (a claim's figure, series, models and metric; a row's series and
columns; a regime check's series), so a typo fails the plan, naming file, figure and key.

This module is plain Python (no Snakemake) so the parser can be tested on its own.
"""
from __future__ import annotations

import copy
import difflib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from codist.algorithms import model_names, registry as algorithm_registry
from codist.config import PROBES, ConfigError, RunConfig, deep_merge, to_dict, to_text_dict, validate
from codist.data_root import needs_root, with_data_root
from codist.launching.cluster import job_resources as cluster_resources
from codist.launching.launch import threads_per_rank
from codist.workloads.metrics import LOGGED

# the experiments-file schema lives with the analysis that also reads it
from analysis.schema import BUILDS_ON, SpecError, check_references, parse, tier_command  # noqa: E402
from analysis import regime, sequential  # noqa: E402

# figure kind -> the script (relative to the repository root) that draws it
KINDS = {"curves": "analysis/plot_curves.py", "table": "analysis/plot_table.py",
         "bars": "analysis/plot_bars.py"}

# panels/models/rows/columns/reference/x/offsets are read by the analysis scripts (analysis/figure_data.py)
SPEC_KEYS = ("panels", "models", "rows", "columns", "reference", "x", "offsets")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ExperimentsError(ValueError):
    """An experiments file that cannot be planned; the message names file, figure, scale, series."""


@dataclass(frozen=True)
class RunRef:
    """One point of a figure: the run that trains `series` with `seed`."""
    series: str
    seed: int
    run_id: str


@dataclass
class Figure:
    paper: str
    figure: str
    scale: str
    title: str
    source: str
    kind: str
    notes: str
    series: list[str]
    runs: list[RunRef]
    spec: dict = field(default_factory=dict)   # the SPEC_KEYS the figure sets (for the analysis)
    # the declared seeds, where a sequential claim's next look extended the list (analysis/sequential.py)
    declared_seeds: list[int] | None = None


@dataclass
class Plan:
    """Everything the workflow needs at one scale: figures, and one config per distinct run."""
    scale: str
    figures: dict[tuple[str, str], Figure] = field(default_factory=dict)
    configs: dict[str, RunConfig] = field(default_factory=dict)
    declared_by: dict[str, str] = field(default_factory=dict)   # run id -> first declaration
    # (paper, figure) -> the scales it declares, for every figure, planned at this scale or not
    scales_of: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    tier: str = "default"          # another tier (schema.TIERS): its figures too
    tier_of: dict[tuple[str, str], str] = field(default_factory=dict)   # every figure's tier
    seed_offset: int = 0           # added to every declared seed (0: the committed seeds)
    state_dir: Path | None = None  # <results>/<scale>: each paper's sequential.csv (analysis/sequential.py)

    def config(self, run_id: str) -> RunConfig:
        if run_id not in self.configs:
            raise ExperimentsError(f"run {run_id} is not declared by any figure at scale {self.scale!r}")
        return self.configs[run_id]

    def config_text(self, run_id: str) -> str:
        """The run's config file: the resolved config, fixed by the run id (and launch section)."""
        return yaml.safe_dump(to_text_dict(self.config(run_id)), sort_keys=False)

    def upstream(self, run_id: str) -> list[str]:
        """Runs this run reads (a two-phase distillation's teacher run): trained before it."""
        other = algorithm_registry.upstream_run(self.config(run_id).algorithm)
        return [other] if other else []

    def threads(self, run_id: str, cores: int | None) -> int:
        """Cores a run occupies: ranks x threads per rank, capped at the cores Snakemake has,
        so an oversubscribed run (more ranks than cores) can still be scheduled."""
        cfg = self.config(run_id)
        want = cfg.parallel.world_size * threads_per_rank(cfg)
        return max(1, min(want, cores)) if cores else want

    def resources(self, run_id: str) -> dict:
        """A cluster job's nodes, GPUs, CPUs, memory and time limit, derived from the run config
        (GPUs for the full scale or launch.device=cuda, CPU otherwise)."""
        cfg = self.config(run_id)
        gpu = cfg.launch.device == "cuda" or (cfg.launch.device == "auto" and cfg.scale == "full")
        res = cluster_resources(cfg, "cuda" if gpu else "cpu")
        res.setdefault("gres", "")
        return res

    def data_resources(self, run_id: str) -> dict:
        """The memory and time limit of the job that prepares a run's LM text (the lm_data rule),
        from the corpus it tokenises (codist.workloads.lm_data.prepare_resources)."""
        from codist.workloads.lm_data import prepare_resources
        return prepare_resources(self.config(run_id))

    def figure(self, paper: str, figure: str) -> Figure:
        return self.figures[(paper, figure)]

    def run_dirs(self, paper: str, figure: str, results: str) -> list[str]:
        ids = dict.fromkeys(r.run_id for r in self.figure(paper, figure).runs)
        return [f"{results}/{self.scale}/runs/{i}" for i in ids]

    def figure_manifest(self, paper: str, figure: str, results: str) -> dict:
        """The `{figure}_runs.json` the analysis scripts read: explicit run directories; an offset
        "@<series>" resolved to that series' train.steps at this scale."""
        f = self.figure(paper, figure)
        steps = {r.series: self.config(r.run_id).train.steps for r in f.runs}
        spec = dict(f.spec)
        if "offsets" in spec:
            spec["offsets"] = {s: steps[o[1:]] if isinstance(o, str) else o for s, o in spec["offsets"].items()}
        return {
            "paper": f.paper, "figure": f.figure, "scale": f.scale, "title": f.title,
            "source": f.source, "kind": f.kind, "notes": f.notes, "series": f.series,
            **spec,
            # fresh seeds (make replicate SEEDS=): the claims table says they are not the declared ones
            **({"seed_offset": self.seed_offset} if self.seed_offset else {}),
            # a sequential claim's looks added seeds: the others' claims read these only (analysis/claims.py)
            **({"declared_seeds": f.declared_seeds} if f.declared_seeds else {}),
            # series -> its resolved run config (first seed): what regime checks measure
            "configs": {r.series: json.loads(json.dumps(to_dict(self.config(r.run_id))))
                        for r in reversed(f.runs)},
            "runs": [{"series": r.series, "seed": r.seed, "run_id": r.run_id,
                      "run_dir": f"{results}/{self.scale}/runs/{r.run_id}"} for r in f.runs],
        }


def set_dotted(raw: dict, key: str, value, where: str) -> None:
    """`a.b.c: value` into the nested mapping (codist.config.apply_overrides semantics)."""
    parts = str(key).split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ExperimentsError(f"{where}: override {key!r}: {part!r} is not a section")
    node[parts[-1]] = copy.deepcopy(value)


def resolve(base: dict, overrides: dict, seed: int, scale: str, where: str) -> RunConfig:
    """One run config from the scale's base, a series' overrides and a seed; validated.

    `scale` is filled in unless the base says otherwise; `name` (not part of the run id)
    defaults to a label fixed by the config itself, so a shared run's file never depends on
    which figure declared it first.
    """
    raw = copy.deepcopy(base)
    raw.setdefault("scale", scale)
    for key, value in overrides.items():
        if key == "seed":
            raise ExperimentsError(f"{where}: 'seed' comes from the scale's seeds list, not a series")
        set_dotted(raw, key, value, where)
    raw["seed"] = seed
    try:
        cfg = validate(raw, source=where)
    except ConfigError as e:
        raise ExperimentsError(str(e)) from None
    if not cfg.name:
        p = cfg.parallel
        models = f"x{p.models}" if p.models > 1 else ""
        cfg = cfg.model_copy(update={"name": f"{cfg.workload.name}-{cfg.algorithm.name}{models}"
                                             f"-w{p.world_size}-seed{cfg.seed}"})
    return cfg


def scale_base(sc: dict, path: Path, where: str) -> dict:
    """The scale's base config: its `preset` file (relative to replications/) under its `base`."""
    base = sc.get("base") or {}
    if not isinstance(base, dict):
        raise ExperimentsError(f"{where}: base: expected a run config mapping")
    if not sc.get("preset"):
        return base
    preset = path.parent.parent / sc["preset"]
    try:
        doc = yaml.safe_load(preset.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ExperimentsError(f"{where}: preset: cannot read {preset}: {e}") from None
    if not isinstance(doc, dict):
        raise ExperimentsError(f"{where}: preset {preset}: expected a run config mapping")
    return deep_merge(doc, base)


def refer(overrides: dict, seed: int, resolved: dict, where: str) -> dict:
    """Replace a value "@<series>" with the run id of that series (same figure, same seed),
    declared earlier in the figure: how a run names another run it reads (a teacher run)."""
    out = {}
    for key, value in overrides.items():
        if isinstance(value, str) and value.startswith("@"):
            ref = (value[1:], seed)
            if ref not in resolved:
                raise ExperimentsError(f"{where}: {key}: {value!r} names no series declared before it in "
                                       f"this figure (with seed {seed})")
            value = resolved[ref]
        out[key] = value
    return out


def probes_plotted(fig: dict) -> list[str]:
    """The probes (codist.rank.probes) a figure plots in its panels: its runs must log them."""
    return [p for p in PROBES if p in (fig.get("panels") or [])]


def with_probes(cfg: RunConfig, probes) -> RunConfig:
    """`cfg` also logging `probes` (not part of the run id: measurements only)."""
    merged = sorted(set(cfg.train.probes) | set(probes))
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"probes": merged})})


def without_probes(cfg: RunConfig) -> dict:
    d = to_dict(cfg)
    d["train"].pop("probes")
    return d


#: a plan of every tier at once, for code that must see every run a scale declares (benchmarks that
#: price them, tests that find the committed run ids); not a tier a user asks for (workflow_config)
EVERY_TIER = "every"


def in_tier(figure_tier: str, tier: str, scale: str) -> bool:
    """Whether a figure of `figure_tier` is planned when `tier` is asked: the default tier plans the
    default figures, each other tier (schema.TIERS) the default figures, its own and those of the tiers it builds on (schema.BUILDS_ON),
    EVERY_TIER all of them. Tiers divide the CPU-sized scales' budget; the full scale is the papers'
    own setups, so it plans every figure whatever the tier."""
    return (figure_tier in ("default", tier, *BUILDS_ON.get(tier, ())) or tier == EVERY_TIER
            or scale == "full")


def shifted_seeds(seeds: list[int], offset: int, where: str, reach: int = 0) -> list[int]:
    """The scale's seeds plus `offset` (make replicate SEEDS=): fresh seeds, none of them one of the
    declared ones, nor one that a sequential claim's looks add to them (up to `reach` seeds:
    sequential.continued), so no run id of the committed results is reused."""
    out = [s + offset for s in seeds]
    n = max(reach, len(seeds))
    taken = sequential.continued(seeds, n)
    if offset and set(sequential.continued(out, n)) & set(taken):
        extra = f" or the seeds its sequential looks add ({taken[len(seeds):]})" if n > len(seeds) else ""
        raise ExperimentsError(f"{where}: seeds: seed_offset {offset} maps {seeds} onto {out}, which reuses "
                               f"declared seeds{extra}; use an offset above {max(taken) - min(seeds)}")
    return out


def sequential_needs(spec, path: Path, scale: str, state_dir: Path | None) -> tuple[dict[str, int], dict[str, int]]:
    """(figure -> the most seeds its sequential claims' looks reach, figure -> the seeds the results
    root's state asks it to hold: <state_dir>/<paper>/sequential.csv, analysis/sequential.py). A state
    row that the claims' design no longer has is an error naming the file: the plan would run seeds
    for a design nobody declares."""
    reach, needs = {}, {}
    designs = {c.id: c.at(scale) for c in spec.claims}
    for c in designs.values():
        if c.sequential:
            reach[c.figure] = max(reach.get(c.figure, 0), c.sequential.looks[-1])
    state = Path(state_dir) / spec.paper / sequential.STATE if state_dir else None
    if not state or not state.exists():
        return reach, needs
    try:
        rows = sequential.read_state(state)
    except sequential.SequentialError as e:
        raise ExperimentsError(str(e)) from None
    for r in rows:
        c = designs.get(r["id"])
        looks = c.sequential.looks if c and c.sequential else None
        if looks != r["looks"] or c.figure != r["figure"]:
            raise ExperimentsError(
                f"{state}: claim {r['id']!r} (figure {r['figure']!r}, looks {r['looks']}) is not a sequential claim "
                f"of {path} with these looks at scale {scale!r} (now: {looks}): its design changed after the state "
                f"was written; remove {state} to restart its looks from the declared seeds")
        needs[c.figure] = max(needs.get(c.figure, 0), r["seeds_needed"])
    return reach, needs


def load_paper(path: str | os.PathLike, scale: str, plan: Plan) -> None:
    """Add the figures `path` declares at `scale` to `plan` (figures without that scale, or of a tier
    the plan does not include, are skipped); seeds shifted by plan.seed_offset. The file is checked
    against analysis/schema.py, then every name its claims and rows use."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ExperimentsError(f"{path}: not valid YAML: {e}") from None
    try:
        spec = parse(doc, path)
    except SpecError as e:
        raise ExperimentsError(str(e)) from None
    paper = spec.paper
    if paper != path.parent.name:
        raise ExperimentsError(f"{path}: paper: {paper!r} must equal its folder name {path.parent.name!r}")
    raw_figures = {k: v for k, v in doc["figures"].items()}
    errors, series_models, logged, first_configs = [], {}, {}, {}
    reach, needs = sequential_needs(spec, path, scale, plan.state_dir)
    for fig_id, fig in spec.figures.items():
        where = f"{path}: {paper} {fig_id}"
        if not ID_RE.match(str(fig_id)):
            raise ExperimentsError(f"{where}: figure id must match {ID_RE.pattern}")
        plan.scales_of[(paper, str(fig_id))] = tuple(fig.scales)
        plan.tier_of[(paper, str(fig_id))] = fig.tier
        if scale not in fig.scales or not in_tier(fig.tier, plan.tier, scale):
            continue
        where = f"{where}, scale {scale!r}"
        sc = raw_figures[fig_id]["scales"][scale]
        declared = shifted_seeds(sc["seeds"], plan.seed_offset, where, reach.get(fig_id, 0))
        seeds, series = sequential.continued(declared, max(len(declared), needs.get(fig_id, 0))), sc["series"]
        base = scale_base(sc, path, where)
        runs, failed, resolved = [], {}, {}
        for label, overrides in series.items():
            if not isinstance(overrides, dict):
                raise ExperimentsError(f"{where}, series {label!r}: expected a mapping of dotted keys")
            for seed in seeds:
                here = f"{where}, series {label!r}, seed {seed}"
                try:
                    cfg = resolve(base, refer(overrides, seed, resolved, here), seed, scale, here)
                except ExperimentsError as e:
                    head, _, detail = str(e).partition("\n")
                    if not detail:   # not a validation error: already names its series
                        raise
                    failed.setdefault(detail, []).append(f"{label!r} seed {seed}")
                    continue
                rid = cfg.run_id()
                cfg = with_probes(cfg, probes_plotted(raw_figures[fig_id]))
                if rid in plan.configs:
                    first = plan.configs[rid]
                    if without_probes(first) != without_probes(cfg):
                        raise ExperimentsError(
                            f"run {rid} is declared twice with different name/launch settings:\n"
                            f"  {plan.declared_by[rid]}\n  {here}\nmake them equal (they share one run)")
                    cfg = with_probes(first, cfg.train.probes)   # a shared run logs what each figure plots
                plan.configs[rid] = cfg
                plan.declared_by.setdefault(rid, here)
                runs.append(RunRef(str(label), seed, rid))
                resolved[(str(label), seed)] = rid
                first_configs.setdefault((str(fig_id), str(label)), cfg)
                series_models.setdefault(fig_id, {})[str(label)] = model_names(cfg.algorithm.name,
                                                                               cfg.parallel.models)
                logged.setdefault(fig_id, set()).update(LOGGED[cfg.workload.name])
        for detail, which in failed.items():
            errors.append(f"{where}, series {', '.join(which)}: invalid run config\n{detail}")
        raw = raw_figures[fig_id]
        plan.figures[(paper, str(fig_id))] = Figure(
            paper, str(fig_id), scale, fig.title, fig.source, fig.kind,
            " ".join(filter(None, [fig.notes, fig.scales[scale].notes])).strip(),
            [str(s) for s in series], runs,
            {k: ([r for r in raw[k] if scale in r.get("scales", [scale])] if k == "rows" else raw[k])
             for k in SPEC_KEYS if k in raw}, declared if len(seeds) > len(declared) else None)
    if errors:
        raise ExperimentsError("\n".join(errors))
    planned = {f for f, fig in spec.figures.items() if in_tier(fig.tier, plan.tier, scale)}
    errors = check_references(spec, path, scale, series_models, logged, planned)
    if errors:
        raise ExperimentsError("\n".join(errors))
    errors = design_errors(spec, path, scale, planned, first_configs)
    if errors:
        raise ExperimentsError("\n".join(errors))


def design_errors(spec, path: Path, scale: str, planned: set, first_configs: dict) -> list[str]:
    """A claim's design facts (regime checks the configuration fixes: rounds, periods, epochs, fresh
    data; analysis/regime.py) validated before any run: one line per fact outside its bounds."""
    def config_of(fig, series):
        if (fig, series) not in first_configs:
            raise regime.RegimeError(f"figure {fig!r} has no series {series!r} at scale {scale!r}")
        return json.loads(json.dumps(to_dict(first_configs[(fig, series)])))
    errors = []
    for c in spec.claims:
        c = c.at(scale)
        if c.figure not in planned or scale not in spec.figures[c.figure].scales or c.full_scale_only or c.not_run:
            continue
        try:
            facts = regime.design_facts(c, config_of)
        except (regime.RegimeError, KeyError) as e:
            errors.append(f"{path}: claim {c.id!r}: design fact: {e}")
            continue
        errors += [f"{path}: claim {c.id!r}: design fact {check!r} is {value:.4g} at scale {scale!r}, outside its bounds "
                   f"(the configuration must fix it before any run)" for check, value, ok in facts if not ok]
    return errors


def load_plan(root: str | os.PathLike, scale: str, data_root: str | None = None, tier: str = "default",
              seed_offset: int = 0, results: str | os.PathLike | None = None) -> Plan:
    """The plan for `scale` from every `root/<paper>/experiments.yaml`. `data_root`: written,
    absolute, into the launch section of every run that reads a data folder relative to it
    (codist.data_root; the run ids stay the same); runs that read none are left as they are, so
    a data root never rewrites their config files. `tier`: another tier adds its figures (in_tier).
    `seed_offset`: added to every seed list (new run ids: a rerun with fresh seeds). `results`: the
    results root planned for; its <scale>/<paper>/sequential.csv (written by the claims analysis)
    extends a figure's seeds to what its sequential claims' looks need (analysis/sequential.py)."""
    root = Path(root)
    files = sorted(root.glob("*/experiments.yaml"))
    if not files:
        raise ExperimentsError(f"{root}: no <paper>/experiments.yaml found")
    plan, errors = Plan(scale, tier=tier, seed_offset=seed_offset,
                        state_dir=Path(results) / scale if results is not None else None), []
    for path in files:
        try:
            load_paper(path, scale, plan)
        except ExperimentsError as e:   # report every paper's problems at once
            errors.append(str(e))
    if errors:
        raise ExperimentsError("\n".join(errors))
    if not plan.figures:
        declared = sorted({s for p in files for f in (yaml.safe_load(p.read_text())["figures"] or {}).values()
                           for s in (f.get("scales") or {})})
        raise ExperimentsError(f"no figure declares scale {scale!r}; declared scales: {', '.join(declared)}")
    if data_root:
        plan.configs = {rid: with_data_root(cfg, data_root) if needs_root(cfg) else cfg
                        for rid, cfg in plan.configs.items()}
    return plan


#: the files of a paper's results folder that are not a figure's (claims.csv, claims.md)
PAPER_FILES = ("claims",)


def unplanned_target(plan: Plan, results: str, target: str) -> str | None:
    """What to say about a requested file of a figure that exists, but not at the plan's scale, or of
    a figure or paper that does not exist (the closest known names, by difflib), where Snakemake
    would only say it has no rule for it; None for any other file."""
    m = re.fullmatch(rf"{re.escape(results.rstrip('/'))}/{re.escape(plan.scale)}/([^/]+)/([^/]+?)"
                     r"(_curves\.csv|_paper\.csv|_paper\.md|_values\.csv|_decision\.csv|_decision\.md|_runs\.json|\.png|\.csv|\.md)",
                     os.path.normpath(target))
    if not m or (m[1], m[2]) in plan.figures or m[2] in PAPER_FILES:
        return None
    if (m[1], m[2]) not in plan.scales_of:
        return _unknown_figure(plan, target, m[1], m[2])
    scales = plan.scales_of[(m[1], m[2])]
    name = f"{m[2]}{m[3]}"
    if plan.scale in scales and not in_tier(tier := plan.tier_of[(m[1], m[2])], plan.tier, plan.scale):
        return f"{target}: {m[1]} {m[2]} is a {tier}-tier figure: add --config tier={tier} ({tier_command(tier)})"
    if "full" in scales:
        return (f"{target}: {m[1]} {m[2]} is a full-scale figure only (no {plan.scale} runs); it is made by "
                f"`snakemake --profile env/profiles/slurm {results}/full/{m[1]}/{name} --config scale=full"
                + (f" results={results}`" if results != "results" else "`"))
    return f"{target}: {m[1]} {m[2]} has no {plan.scale} runs (declared scales: {', '.join(scales)})"


def _unknown_figure(plan: Plan, target: str, paper: str, figure: str) -> str | None:
    """'did you mean' for a figure (or paper) no experiments file declares; None for a folder that is
    not a paper's and names no paper closely (e.g. results/<scale>/frontier/)."""
    papers = sorted({p for p, _ in plan.scales_of})
    if paper not in papers:
        close = difflib.get_close_matches(paper, papers, n=3, cutoff=0.75)
        return f"{target}: no paper {paper!r}; did you mean {' or '.join(close)}?" if close else None
    known = sorted(f for p, f in plan.scales_of if p == paper)
    close = difflib.get_close_matches(figure, known, n=3, cutoff=0.5)
    return (f"{target}: {paper} has no figure {figure!r}; "
            + (f"did you mean {' or '.join(close)}?" if close else f"its figures: {', '.join(known)}"))


def manifest_text(plan: Plan, paper: str, figure: str, results: str) -> str:
    return json.dumps(plan.figure_manifest(paper, figure, results), indent=2) + "\n"
