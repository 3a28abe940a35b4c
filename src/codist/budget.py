"""GPU-hour budget of the full scale: the pricing behind `python workflows/budget.py [--gpu a100]`
(also `make budget`), which reads the plan the Snakefile builds for `--config scale=full`
(workflows/experiments.py) and hands it here: codist never imports the checkout's workflows/.

Runs, steps, batch per rank and world size come from the plan's real configs, and a per-GPU
throughput table (replications/throughput.yaml: published numbers with their source, or derived
from one; measured rows from `make gpu-check`'s results/bench/gpu_throughput.csv; a registered
workload's own file, its `throughput=`, adds its models). A run's model name and units per sample
are its workload's registration's (`throughput_model`, `units_per_sample`), its extra forward
passes its algorithm's (`extra_forwards`). Per run:

    seconds = steps x (1 + extra forward passes per step / 3) x units per GPU per step / (units/s per GPU)

where units are images, samples or tokens (LM: batch x seq_len; translation: sentences x the data
set's mean target length), the rate is the one of the run's math (`rate_precision`: an fp32 run
with `train.tf32`, the default, at the TF32 rate), and an extra forward pass (a codistillation teacher, an EC-DNN member,
a two-phase teacher) costs a third of a training step (backward = 2 x forward). Data-parallel
scaling is taken as perfect and evaluation, communication and data loading as free, so the hours
are a lower bound for the stated per-GPU rate. GPU-hours = hours x world size.

`markdown` is the printed table, `write_csv` the CSV and `update_readme` the docs' budget block.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
THROUGHPUT = ROOT / "replications" / "throughput.yaml"   # the checkout's table (a run's units per sample read it too)
PRECISIONS = ("fp32", "bf16")    # a run's train.precision: the budget's columns
# the math a rate was measured at: fp32 storage with TF32 products (train.tf32, the runs' default),
# fp32 products throughout (train.tf32: false), bf16 autocast. A throughput table's `fp32` column
# is its TF32 rate (replications/throughput.yaml: "fp32 is TF32 on A100"; on a GPU without TF32, a
# V100, a TF32 run computes in fp32); the strict fp32 rate comes only from `make gpu-check`.
RATE_PRECISIONS = ("tf32", "fp32", "bf16")
TABLE_COLUMNS = {"fp32": "tf32", "bf16": "bf16"}   # a table's column -> the math of its rate
# what `make gpu-check` records of each row's matmuls (torch.get_float32_matmul_precision())
MATMUL_PRECISION = {"tf32": "high", "fp32": "highest", "bf16": "high"}
NODE_GPUS = 8
FORWARD_SHARE = 1 / 3     # a forward pass as a share of a training step (forward + 2x backward)
MARK_START, MARK_END = "<!-- budget:start -->", "<!-- budget:end -->"


class BudgetError(ValueError):
    """A throughput table or plan the planner cannot use; the message names file, key and expectation."""


@dataclass
class Rate:
    units_per_s: float
    kind: str          # published | derived | measured
    source: str


@dataclass
class Throughput:
    """replications/throughput.yaml, resolved: (model, gpu, math) -> Rate, math one of RATE_PRECISIONS."""
    path: str
    units: dict[str, str]
    rates: dict[tuple[str, str, str], Rate]
    translation: dict[str, dict]
    gpus: dict[str, str] = field(default_factory=dict)

    def rate(self, model: str, gpu: str, precision: str) -> Rate | None:
        return self.rates.get((model, gpu, precision))


def _need(d, key, where, kind=None):
    if not isinstance(d, dict) or key not in d:
        raise BudgetError(f"{where}: missing key {key!r}")
    if kind is not None and not isinstance(d[key], kind):
        raise BudgetError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {d[key]!r}")
    return d[key]


def load_throughput(path: str | Path) -> Throughput:
    """Parse and resolve the throughput table (derived rows computed from their reference)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise BudgetError(f"{path}: cannot read the throughput table: {e}") from None
    where = str(path)
    models, sources = _need(doc, "models", where, dict), doc.get("sources") or {}
    units, rates = {}, {}
    for name, m in models.items():
        here = f"{where}: models.{name}"
        units[name] = _need(m, "unit", here, str)
        if units[name] not in ("image", "sample", "token"):
            raise BudgetError(f"{here}.unit: {units[name]!r}; expected image, sample or token")
        for gpu, row in (m.get("throughput") or {}).items():
            src = _need(row, "source", f"{here}.throughput.{gpu}", str)
            if src not in sources:
                raise BudgetError(f"{here}.throughput.{gpu}.source: {src!r} is not a key of sources:")
            for p, math in TABLE_COLUMNS.items():
                if p in row:
                    if not isinstance(row[p], (int, float)) or row[p] <= 0:
                        raise BudgetError(f"{here}.throughput.{gpu}.{p}: expected a positive number, got {row[p]!r}")
                    rates[(name, gpu, math)] = Rate(float(row[p]), "published", src)
    for name, m in models.items():
        if "derive" not in m:
            continue
        here = f"{where}: models.{name}.derive"
        ref = _need(m["derive"], "from", here, str)
        if ref not in models or "macs" not in models[ref] or "macs" not in m:
            raise BudgetError(f"{here}: needs `macs` on {name!r} and on a published model {ref!r}")
        factor = float(models[ref]["macs"]) / float(m["macs"])
        for (r, gpu, p), rate in list(rates.items()):
            if r == ref and rate.kind == "published":
                rates[(name, gpu, p)] = Rate(rate.units_per_s * factor, "derived",
                                             f"{rate.source} x {factor:.4g} ({m['derive'].get('why', 'MACs ratio')})")
    return Throughput(str(path), units, rates, doc.get("translation") or {}, doc.get("gpus") or {})


def add_measured(table: Throughput, csv_path: str | Path) -> list[str]:
    """Rows of `make gpu-check`'s CSV (device cuda) as measured rates of their math (`precision`:
    tf32, fp32 or bf16, checked against the matmul precision the row records); returns the GPU
    kinds added. A row without that record is an older gpu_check's, whose "fp32" mixed TF32
    convolutions with fp32 matmuls: one line, measure again."""
    path = Path(csv_path)
    if not path.is_file():
        return []
    kinds = set()
    with path.open() as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            if row.get("device") != "cuda" or not row.get("units_per_s"):
                continue
            where = f"{path}: line {line} ({row.get('model')}, precision {row.get('precision')!r})"
            if row.get("precision") not in RATE_PRECISIONS:
                raise BudgetError(f"{where}: precision must be one of {', '.join(RATE_PRECISIONS)}")
            if row.get("float32_matmul_precision") != MATMUL_PRECISION[row["precision"]]:
                raise BudgetError(f"{where}: float32_matmul_precision is {row.get('float32_matmul_precision')!r}, "
                                  f"expected {MATMUL_PRECISION[row['precision']]!r} (a row of an older gpu_check "
                                  f"has none); measure it again with `make gpu-check`")
            key = (row["model"], row["gpu"], row["precision"])
            table.rates[key] = Rate(float(row["units_per_s"]), "measured",
                                    f"{path} ({row['device_name']}, batch {row['batch_per_gpu']}, {row['date']})")
            table.gpus.setdefault(row["gpu"], row["device_name"])
            kinds.add(row["gpu"])
    return sorted(kinds)


# --------------------------------------------------------------------------- a run's cost

def _workload_spec(cfg):
    from .workloads import spec
    return spec(cfg.workload.name)


def model_key(cfg) -> str:
    """The throughput table's model name for a run config, as its workload's registration says
    (`throughput_model`)."""
    name = _workload_spec(cfg).throughput_model
    if name is None:
        raise BudgetError(f"workload {cfg.workload.name!r} registers no throughput_model (codist.workloads."
                          f"register): the budget cannot price its runs")
    return name(cfg.workload)


def units_per_sample(cfg, table: Throughput) -> float:
    """Units (images, samples, tokens) per sample, as the workload's registration says
    (`units_per_sample`; none: 1): LM tokens per sequence, translation mean target tokens per sentence."""
    units = _workload_spec(cfg).units_per_sample
    if units is None:
        return 1.0
    try:
        return float(units(cfg.workload, table))
    except LookupError as e:
        raise BudgetError(f"{table.path}: {e.args[0]}") from None


def add_registered(table: Throughput) -> list[str]:
    """Join the models of every registered workload's own throughput file (`throughput=`, a plugin's
    rates) to the table; returns the files read. A model named twice is one line."""
    from .workloads import specs
    read = []
    for spec in specs().values():
        if spec.throughput is None:
            continue
        extra = load_throughput(spec.throughput)
        clash = sorted(set(extra.units) & set(table.units))
        if clash:
            raise BudgetError(f"{extra.path}: models.{clash[0]} is already in {table.path} (workload "
                              f"{spec.name!r}'s throughput file may only add models)")
        table.units.update(extra.units)
        table.rates.update(extra.rates)
        for gpu, text in extra.gpus.items():
            table.gpus.setdefault(gpu, text)
        read.append(extra.path)
    return read


def extra_forwards(cfg) -> float:
    """Mean extra forward passes per step: teachers or members run on each rank's batch (see the
    module docstring), as the algorithm's registration says (`extra_forwards`; none declared: 0)."""
    from .algorithms.registry import spec
    count = spec(cfg.algorithm.name).extra_forwards
    return 0.0 if count is None else float(count(cfg))


def rate_precision(cfg, precision: str) -> str:
    """The math of a run at `precision` (fp32 or bf16): an fp32 run with `train.tf32` (the default)
    computes its fp32 products in TF32 (codist.runtime.cuda_defaults), so its rate is the TF32 one."""
    return "tf32" if precision == "fp32" and cfg.train.tf32 else precision


def run_hours(cfg, table: Throughput, gpu: str, precision: str) -> tuple[float, Rate] | None:
    """(wall hours, the rate used) of one run at `precision`, or None where the table has no rate."""
    rate = table.rate(model_key(cfg), gpu, rate_precision(cfg, precision))
    if rate is None:
        return None
    units = cfg.train.batch_per_rank * units_per_sample(cfg, table)
    seconds = cfg.train.steps * (1 + FORWARD_SHARE * extra_forwards(cfg)) * units / rate.units_per_s
    return seconds / 3600, rate


# --------------------------------------------------------------------------- the plan's budget

@dataclass
class Row:
    paper: str
    figure: str                 # "" for a paper's total, "all" for the grand total
    runs: int
    gpus: tuple[int, int]       # min, max world size
    hours: dict = field(default_factory=dict)       # precision -> longest run (None: no rate)
    gpu_hours: dict = field(default_factory=dict)   # precision -> sum over runs
    basis: str = ""

    @property
    def fits_node(self) -> bool:
        return self.gpus[1] <= NODE_GPUS


def _row(paper, figure, run_ids, plan, table, gpu) -> Row:
    cfgs = [plan.config(r) for r in run_ids]
    ws = [c.parallel.world_size for c in cfgs]
    row = Row(paper, figure, len(cfgs), (min(ws), max(ws)))
    kinds = set()
    for p in PRECISIONS:
        costs = [run_hours(c, table, gpu, p) for c in cfgs]
        if any(c is None for c in costs):
            row.hours[p] = row.gpu_hours[p] = None
            continue
        row.hours[p] = max(h for h, _ in costs)
        row.gpu_hours[p] = sum(h * c.parallel.world_size for (h, _), c in zip(costs, cfgs))
        kinds |= {r.kind for _, r in costs}
    row.basis = "+".join(sorted(kinds)) or "no rate"
    return row


def plan_budget(plan, table: Throughput, gpu: str) -> list[Row]:
    """One row per figure, then one per paper (its distinct runs, each counted once), then the total."""
    rows, by_paper = [], {}
    for (paper, fig), f in sorted(plan.figures.items()):
        ids = list(dict.fromkeys(r.run_id for r in f.runs))
        rows.append(_row(paper, fig, ids, plan, table, gpu))
        by_paper.setdefault(paper, {}).update(dict.fromkeys(ids))
    for paper, ids in sorted(by_paper.items()):
        rows.append(_row(paper, "", list(ids), plan, table, gpu))
    every = list(dict.fromkeys(i for ids in by_paper.values() for i in ids))
    rows.append(_row("all", "all", every, plan, table, gpu))
    return rows


# --------------------------------------------------------------------------- output

COLUMNS = ["paper", "figure", "runs", "gpus_per_run", "fits_one_8gpu_node",
           "hours_fp32", "gpu_hours_fp32", "hours_bf16", "gpu_hours_bf16", "basis"]


def _num(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.2f}"


def _cells(r: Row) -> list[str]:
    gpus = str(r.gpus[0]) if r.gpus[0] == r.gpus[1] else f"{r.gpus[0]}-{r.gpus[1]}"
    return [r.paper, r.figure or "(paper)", str(r.runs), gpus, "yes" if r.fits_node else "no",
            _num(r.hours["fp32"]), _num(r.gpu_hours["fp32"]), _num(r.hours["bf16"]), _num(r.gpu_hours["bf16"]),
            r.basis]


def write_csv(rows: list[Row], path: str | Path, gpu: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gpu"] + COLUMNS)
        for r in rows:
            raw = [r.hours["fp32"], r.gpu_hours["fp32"], r.hours["bf16"], r.gpu_hours["bf16"]]
            w.writerow([gpu, r.paper, r.figure, r.runs, f"{r.gpus[0]}-{r.gpus[1]}", r.fits_node]
                       + ["" if x is None else round(x, 3) for x in raw] + [r.basis])


def markdown(rows: list[Row], table: Throughput, gpu: str, command: str, measured: list[str] = ()) -> str:
    head = ["paper", "figure", "runs", "GPUs per run", "fits one 8-GPU node", "hours fp32", "GPU-hours fp32",
            "hours bf16", "GPU-hours bf16", "throughput basis"]
    lines = [f"Generated by `{command}` (src/codist/budget.py) from the `--config scale=full` plan and "
             f"`{Path(table.path).relative_to(ROOT) if Path(table.path).is_relative_to(ROOT) else table.path}`, "
             f"GPU: {table.gpus.get(gpu, gpu)}. Hours: the figure's longest run (all its runs in parallel); "
             "GPU-hours: the sum over its runs. A paper's row counts each of its runs once (figures share "
             "runs); the last row is every full-scale run. Lower bounds at the stated per-GPU rate: perfect "
             "data-parallel scaling, evaluation, communication and data loading free; teacher forward passes "
             "counted; fp32 is fp32 weights with TF32 products where a run sets `train.tf32` (the default), "
             "at the TF32 rate. \"derived\" rates are estimates (replications/throughput.yaml says how); \"measured\" "
             "rates are `make gpu-check`'s (results/bench/gpu_throughput.csv), "
             + (f"measured on: {', '.join(measured)} (`--gpu <kind>` prices the plan at them)." if measured
                else "none measured yet."), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = _cells(r)
        if not r.figure:
            cells = [f"**{c}**" for c in cells]
        if r.figure == "all":
            cells = ["**all papers**", "", *[f"**{c}**" for c in cells[2:]]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def update_readme(path: str | Path, body: str) -> None:
    """Replace the text between the budget markers (they must exist once each)."""
    path = Path(path)
    text = path.read_text()
    if text.count(MARK_START) != 1 or text.count(MARK_END) != 1:
        raise BudgetError(f"{path}: needs one {MARK_START} and one {MARK_END} line around the budget table")
    head, rest = text.split(MARK_START)
    _, tail = rest.split(MARK_END)
    path.write_text(f"{head}{MARK_START}\n{body}{MARK_END}{tail}")
