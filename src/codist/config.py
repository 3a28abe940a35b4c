"""One validated schema for a run.

A run config is YAML; every section is a pydantic model with `extra="forbid"`, so an
unknown key, a wrong type or a value out of range fails with a message naming the key,
the value and what is allowed, before any process starts. `--set a.b=value`
overrides are applied to the raw mapping before validation, so they are checked too.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, StrictInt, ValidationError, model_validator
from pydantic.fields import FieldInfo

from .algorithms import registry as algorithm_registry
from . import workloads as workload_registry
from .workloads import data_version
from .workloads.cifar_config import CifarConfig
from .workloads.schema import SECTION_CONFIG


class ConfigError(ValueError):
    """A run config that cannot be used; the message names file, key, value and what is allowed."""


class _Section(BaseModel):
    model_config = SECTION_CONFIG


# The `algorithm:` section: a union of the registered algorithms' config classes, tagged by `name`
# (codist.algorithms.registry; rebuilt when a plugin registers later).
AlgorithmConfig = algorithm_registry.config_union()
# The `workload:` section: the same for the registered workloads (codist.workloads).
WorkloadConfig = workload_registry.config_union()


def _default_algorithm():
    return algorithm_registry.spec("allreduce").config()


class ParallelConfig(_Section):
    """World = models x ranks_per_model. `world_size` is the number of processes."""
    world_size: StrictInt = Field(1, ge=1)
    models: StrictInt = Field(1, ge=1, description="independent models (n); each gets world_size/models ranks")
    grad_reduction: Literal["engine", "ddp"] = Field(
        "engine", description="how a model group of several ranks all-reduces its gradients: engine = "
        "DeepSpeed's ZeRO-0 engine, after backward ends; ddp = torch DDP, in buckets whose all-reduces start "
        "during backward (overlapping it), through a Python comm hook the meter counts "
        "(codist.algorithms.updates.OverlapUpdate); a group of one rank reduces nothing, and the DDP "
        "baselines (powersgd, post_local_sgd) reduce through DDP either way")
    ddp_bucket_mb: float | None = Field(None, gt=0, description="grad_reduction: ddp: DDP's bucket size in "
                                        "MiB (None: DDP's default, 25, with a first bucket of 1)")

    @model_validator(mode="after")
    def _bucket_with_ddp(self):
        if self.ddp_bucket_mb is not None and self.grad_reduction != "ddp":
            raise ValueError(f"parallel.ddp_bucket_mb={self.ddp_bucket_mb} with parallel.grad_reduction="
                             f"{self.grad_reduction}: the bucket size is DDP's; allowed: grad_reduction: ddp")
        return self

    @property
    def ranks_per_model(self) -> int:
        return self.world_size // self.models


class LaunchConfig(_Section):
    """How processes start. Not part of the run id: it does not change the results."""
    launcher: Literal["deepspeed", "torchrun", "fork", "warm"] = Field(
        "deepspeed", description="deepspeed or torchrun: one process per rank; fork (single-node CPU only): "
        "one process imports torch/deepspeed once and forks the ranks (codist.launching.fork); warm: "
        "fork from a warm server that keeps those imports between runs (codist.launching.warm_server)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    backend: Literal["auto", "gloo"] = Field(
        "auto", description="collectives: auto = NCCL on GPUs, gloo on the CPU; gloo on GPUs lets a node's ranks "
        "share its GPUs round-robin (a check of the multi-rank path on CUDA tensors with one GPU, as `make "
        "gpu-check` runs it; slow: gloo copies through host memory)")
    threads_per_rank: StrictInt | None = Field(None, ge=1, description="default: usable cores // world_size; an srun task: its SLURM_CPUS_PER_TASK")
    allocator: Literal["system", "reuse"] = Field(
        "system", description="system: the C library's malloc as it comes; reuse (glibc): large blocks from the "
        "heap, reused across updates instead of mapped and faulted in afresh each time (codist.runtime.allocator: "
        "faster CPU updates at large batch, higher peak memory)")
    master_port: StrictInt | None = Field(None, ge=1024, le=65535, description="default: a free port")
    oversubscribe: bool = Field(False, description="allow more CPU ranks than cores (slow; wall times inflate)")
    gpus_per_node: StrictInt = Field(8, ge=1, description="GPUs per node on a cluster (multi-node: world_size / this)")
    cpus_per_rank: StrictInt = Field(8, ge=1, description="CPU cores a cluster job asks per GPU rank (data loading)")
    time_limit_min: StrictInt = Field(60, ge=1, description="wall-time limit a cluster job asks for")
    mem_mb_per_rank: StrictInt = Field(16000, ge=100, description="memory a cluster job asks per rank")
    gpus_per_task: bool = Field(False, description="SLURM: srun --gpus-per-task=1, each rank shown only its own "
                                "GPU (default: every rank sees its node's GPUs and takes the one at its "
                                "LOCAL_RANK, so NCCL can use NVLink / CUDA IPC between them)")
    start_timeout_s: StrictInt = Field(1800, ge=10, description="during start-up (rendezvous, groups, data, "
                                       "engines, a checkpoint read) a collective waiting longer fails the run")
    collective_timeout_s: StrictInt = Field(600, ge=10, description="during training a collective waiting longer "
                                            "fails the run")
    hang_timeout_s: StrictInt = Field(900, ge=2, description="the launcher kills a run in which no rank made "
                                "progress (updates, or preparing its data) for this long and names the rank")
    data_root: str | None = Field(None, min_length=1, description="the folder a relative workload.data_dir is "
                                  "joined to (codist.data_root; default $CODIST_DATA_ROOT); the data's location, "
                                  "so not part of the run id")


class OptimizerConfig(_Section):
    name: Literal["sgd", "adam", "adagrad"] = "sgd"
    lr: float = Field(0.1, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = False
    weight_decay: float = Field(5e-4, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = Field(0.0, ge=0, description="0 disables (DeepSpeed's default would be 1.0)")


class ScheduleConfig(_Section):
    """Learning-rate schedule as a function of the step: linear warmup, then constant/step/cosine."""
    name: Literal["constant", "step", "cosine"] = "constant"
    warmup_steps: StrictInt = Field(0, ge=0)
    milestones: list[StrictInt] = Field(default_factory=list, description="steps where lr *= gamma (name: step)")
    gamma: float = Field(0.1, gt=0, le=1)
    weight_decay_changes: dict[int, float] = Field(
        default_factory=dict, description="update -> optimizer weight decay from that update on (Sodhani et "
        "al. 2020 cut L2 at the lr decays: 1e-4 -> 1e-5 -> 0)")

    @model_validator(mode="after")
    def _changes_valid(self):
        bad = {k: v for k, v in self.weight_decay_changes.items() if k < 0 or v < 0}
        if bad:
            raise ValueError(f"schedule.weight_decay_changes={bad}: updates and weight decays must be >= 0")
        return self


#: measurements a run can log beside its metrics (codist.rank.probes implements them)
PROBES = ("init_distance",)
Probe = Literal[PROBES]


class TrainConfig(_Section):
    steps: StrictInt = Field(100, ge=1)
    batch_per_rank: StrictInt = Field(32, ge=1)
    eval_every: StrictInt = Field(50, ge=1, description="evaluate every this many steps (and at the last step)")
    eval_batch: StrictInt = Field(500, ge=1)
    eval_size: StrictInt = Field(0, ge=0, description="evaluate on this many validation examples, evenly spaced "
                                 "over the set (0: all of it); a rehearsal's small validation slice")
    save_model: bool = Field(True, description="write model_<name>.pt (state dict) at the end")
    checkpoint_every: StrictInt = Field(0, ge=0, description="updates between checkpoints (0: none); a rerun "
                                  "resumes from the newest")
    probes: list[Probe] = Field(
        default_factory=list, description="measurements logged beside the metrics (codist.rank.probes): "
        "init_distance, each local model's L2 distance from its initialisation (Sodhani et al. Fig. 1)")
    precision: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32", description="bf16 / fp16: mixed precision, fp32 master weights, the forward under autocast, "
        "gradients all-reduced in 16 bits, fp16 with dynamic loss scaling (codist.runtime.precision)")
    compile: bool = Field(False, description="torch.compile each trained model (in place; worth it on a GPU); "
                          "not part of the run id")
    tf32: bool = Field(True, description="on a GPU, fp32 matmuls and convolutions in TF32 (Ampere and newer: "
                       "10-bit mantissa products, fp32 sums; codist.runtime.cuda_defaults); no effect on CPU")
    deterministic: bool = Field(False, description="deterministic kernels (torch.use_deterministic_algorithms, "
                                "cuDNN without autotuning, CUBLAS_WORKSPACE_CONFIG=:4096:8; codist.runtime.cuda_defaults): "
                                "reruns give the same numbers; an op without a deterministic kernel fails the run")


#: the largest seed: codist.runtime.data seeds torch generators with seed * 7919 * 1_000_003 + small terms (< 2**64)
SEED_MAX = 2**31 - 1


class RunConfig(_Section):
    name: str = Field("", description="a label; not part of the run id")
    source: str = Field("", description="where this setup comes from (paper, section); not part of the run id")
    seed: StrictInt = Field(0, ge=0, le=SEED_MAX, description="at most 2**31 - 1: the data order's generator "
                            "seeds (codist.runtime.data) stay within torch's 64-bit range")
    scale: Literal["embedded", "full"] = "embedded"
    workload: WorkloadConfig = Field(default_factory=lambda: CifarConfig())
    algorithm: AlgorithmConfig = Field(default_factory=_default_algorithm)
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    launch: LaunchConfig = Field(default_factory=LaunchConfig)

    @model_validator(mode="after")
    def _fits(self) -> "RunConfig":
        p = self.parallel
        if p.world_size % p.models:
            raise ValueError(
                f"parallel.world_size={p.world_size} does not fit parallel.models={p.models}: "
                f"world_size must be a multiple of models (each model gets world_size/models ranks)")
        name = self.algorithm.name
        least = algorithm_registry.spec(name).min_models
        if least is None and p.models != 1:
            raise ValueError(f"parallel.models={p.models} with algorithm.name={name}: {name} trains one "
                             f"model; allowed: parallel.models=1")
        if least is not None and p.models < least:
            raise ValueError(f"parallel.models={p.models} with algorithm.name={name}: {name} needs at least "
                             f"{least} models; allowed: parallel.models >= {least}")
        # A period the user chose that exceeds the run never fires. Judged on the value, not on
        # model_fields_set: the ranks reload the resolved config, where every field is set, so a
        # default period (codistill's 50 against a 6-step test run) must pass there as it did here.
        period = algorithm_registry.spec(name).period
        chosen = period and getattr(self.algorithm, period) != type(self.algorithm).model_fields[period].default
        if chosen and getattr(self.algorithm, period) > self.train.steps:
            raise ValueError(f"algorithm.{period}={getattr(self.algorithm, period)} with train.steps="
                             f"{self.train.steps}: the models would never exchange; allowed: at most train.steps")
        bad = [m for m in self.schedule.milestones if m <= 0 or m > self.train.steps]
        if bad:
            raise ValueError(f"schedule.milestones={self.schedule.milestones}: each must be in "
                             f"[1, train.steps={self.train.steps}]")
        return self

    def run_id(self) -> str:
        return run_id(self)


def _rebuild_algorithm_field() -> None:
    """An algorithm registered after this module was imported (a plugin imported by a test, say)
    joins the `algorithm:` union: the field is rebuilt with the registry's current union."""
    global AlgorithmConfig
    AlgorithmConfig = algorithm_registry.config_union()
    RunConfig.__pydantic_fields__["algorithm"] = FieldInfo.from_annotated_attribute(
        AlgorithmConfig, Field(default_factory=_default_algorithm))
    RunConfig.model_rebuild(force=True)


algorithm_registry.on_change(_rebuild_algorithm_field)


def _rebuild_workload_field() -> None:
    """The same for a workload registered later (a CODIST_PLUGINS module's)."""
    global WorkloadConfig
    WorkloadConfig = workload_registry.config_union()
    RunConfig.__pydantic_fields__["workload"] = FieldInfo.from_annotated_attribute(
        WorkloadConfig, Field(default_factory=lambda: CifarConfig()))
    RunConfig.model_rebuild(force=True)


workload_registry.on_change(_rebuild_workload_field)


# ---------------------------------------------------------------- loading

def _union_members(annotation) -> dict[str, type[BaseModel]]:
    """{tag: model} of a discriminated union on `name` (empty for a plain model)."""
    args = getattr(annotation, "__metadata__", None) and annotation.__origin__
    members = getattr(args, "__args__", None) or getattr(annotation, "__args__", None) or ()
    return {m.model_fields["name"].default: m for m in members
            if isinstance(m, type) and issubclass(m, BaseModel) and "name" in m.model_fields}


def _clean_loc(loc: tuple) -> tuple[tuple, list[str]]:
    """The user's key path (without pydantic's union tags) and the keys allowed beside the last part."""
    model: Any = RunConfig
    path, allowed = [], sorted(RunConfig.model_fields)
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        path.append(part)
        field = getattr(model, "model_fields", {}).get(part) if isinstance(model, type) else None
        if field is None:
            break
        members = _union_members(field.annotation)
        if members and parts and parts[0] in members:
            model = members[parts.pop(0)]
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            model = field.annotation
        else:
            break
        if parts:
            allowed = sorted(model.model_fields)
    return tuple(path), allowed


def _short(value, limit: int = 80) -> str:
    """repr(value), cut to `limit` characters: a value (an alias's expansion, say) may be huge."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _from_set(key: str, overrides: list[str]) -> str | None:
    """The `--set` item that gave `key` (or a section above or below it), if any."""
    for item in reversed(overrides):
        name = item.split("=", 1)[0].strip()
        if key == name or key.startswith(name + ".") or name.startswith(key + "."):
            return item
    return None


def _format_errors(err: ValidationError, source: str, overrides: list[str] = ()) -> str:
    """One line per error naming the key, what was given (cut short) and what is allowed; an error
    from a `--set` names that `--set`, and the header names the file only if the file has one."""
    lines, sets = [], []
    for e in err.errors():
        loc, allowed_keys = _clean_loc(e["loc"])
        key = ".".join(str(x) for x in loc) or "(top level)"
        item = _from_set(key, list(overrides))
        sets.append(item)
        label = f"{key} (--set {item})" if item else key
        if e["type"] == "extra_forbidden":
            allowed = ", ".join(allowed_keys)
            close = difflib.get_close_matches(str(loc[-1]), allowed_keys, n=1) if loc else []
            hint = f"did you mean {'.'.join([*map(str, loc[:-1]), close[0]])}? " if close else ""
            lines.append(f"  {label}: unknown key (value {_short(e['input'])}); {hint}allowed keys here: {allowed}")
        elif e["type"] == "union_tag_not_found":   # a section without `name`: say which names exist
            names = ", ".join(_union_members(RunConfig.model_fields[loc[0]].annotation)) if loc else ""
            lines.append(f"  {label}: no 'name' given; allowed names: {names}")
        elif e["type"] == "value_error":
            lines.append(f"  {label}: {e['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"  {label}: got {_short(e.get('input'))}: {e['msg']}")
    header = (f"--set {', '.join(dict.fromkeys(sets))}: invalid run config" if all(sets)
              else f"{source}: invalid run config")
    return "\n".join([header, *lines])


def deep_merge(base: dict, *overrides: dict) -> dict:
    """A deep copy of `base` with each mapping of `overrides` merged in, section by section
    (nested mappings merge, everything else replaces): a preset under a figure's base, etc."""
    out = copy.deepcopy(base)
    for over in overrides:
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = deep_merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key, line: int, first: int):
        super().__init__(f"line {line}: key {key!r} given twice (first on line {first}); each key may appear "
                         f"once in a mapping")


#: the most values a config may hold with its aliases expanded (a run config has a few hundred;
#: a 461-byte "billion laughs" would expand to 10**9 and take minutes and gigabytes to validate)
MAX_YAML_VALUES = 100_000


def _expanded_size(node, memo: dict, active: set) -> int:
    """How many values `node` holds with every alias expanded (each node counted once: linear)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise yaml.YAMLError(f"line {node.start_mark.line + 1}: an alias refers to a value containing itself")
    active.add(key)
    children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
    total = 1
    for child in children:
        total += _expanded_size(child, memo, active)
        if total > MAX_YAML_VALUES:
            raise yaml.YAMLError(f"line {node.start_mark.line + 1}: with its aliases expanded this value holds "
                                 f"more than {MAX_YAML_VALUES} values (an alias bomb?); refused")
    active.discard(key)
    memo[key] = total
    return total


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML silently keeps the
    last one, so a typo'd second `lr:` would win unseen; `<<` merges may still be overridden),
    and a document whose aliases expand to more than MAX_YAML_VALUES values."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node

    def construct_mapping(self, node, deep=False):
        first: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in first:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1, first[key])
            except TypeError:   # an unhashable key: SafeLoader reports it below
                continue
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def parse_yaml(text: str):
    """yaml.safe_load, refusing duplicate keys."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def apply_overrides(raw: dict, overrides: list[str], source: str = "--set") -> dict:
    """`a.b.c=value` pairs (value parsed as YAML) applied to a copy of the raw mapping."""
    out = copy.deepcopy(raw)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{source}: {item!r} is not key=value (e.g. train.steps=200)")
        check_path_text(f"{source} {item!r}", item)   # every value is written into the run's config.yaml
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"{source}: {key}: {part!r} holds {nxt!r}, not a section")
            node = nxt
        try:
            node[parts[-1]] = parse_yaml(text)
        except yaml.YAMLError as e:   # one line, not PyYAML's marked excerpt
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ConfigError(f"{source} {item}: the value is not valid YAML ({problem}); quote a string, "
                              f"e.g. --set {key}='\"...\"'") from None
    return out


def load_raw(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        raw = parse_yaml(path.read_text())
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})") from None
    except DuplicateKeyError as e:
        raise ConfigError(f"{path}, {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if raw is None or raw == {}:   # an empty file would otherwise launch a default run
        raise ConfigError(f"{path}: the config is empty (no keys, only comments or blank lines); expected "
                          f"a mapping of sections, e.g. workload: {{name: cifar}}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def validate(raw: dict, source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(e, source)) from None


def load(path: str | os.PathLike, overrides: list[str] = ()) -> RunConfig:
    """Read, override and validate a run config file (an error from a `--set` names it)."""
    raw = apply_overrides(load_raw(path), list(overrides))
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(e, str(path), list(overrides))) from None


def check_path_text(label: str, path: str | os.PathLike) -> None:
    """A path the run writes into its files (config.yaml, manifest, metrics) must be UTF-8 text:
    ConfigError naming `label` otherwise (a byte such as 0xff from the command line)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(f"{label}: {os.fspath(path)!r} is not UTF-8 text (byte at position {e.start}); "
                          f"use a path of UTF-8 characters") from None


def never_fires(cfg: RunConfig) -> str | None:
    """A note when the algorithm's default period is longer than the run (a chosen one is refused
    by the schema): its exchange never happens, which a shortened `train.steps` makes easy to miss.
    Said by `codist check` and `codist run`, not refused: the ranks reload the resolved config, and a
    short run that never exchanges is a legitimate test of everything else."""
    every = algorithm_registry.exchange_period(cfg.algorithm)
    if every is None or every <= cfg.train.steps:
        return None
    field = algorithm_registry.spec(cfg.algorithm.name).period
    return (f"note: algorithm.{field}={every} ({cfg.algorithm.name}'s default) is more than train.steps="
            f"{cfg.train.steps}: the run ends before the algorithm's first exchange; set algorithm.{field} to "
            f"at most {cfg.train.steps} if it should have one")


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json")


#: config keys that do not change a run's results, so are not part of its id
NOT_IN_RUN_ID = ("name", "source", "launch", "train.save_model", "train.checkpoint_every", "train.probes",
                 "workload.cache_dir", "train.compile")

#: keys added after run ids were published, hashed only when they differ from this value, so every
#: run configured before them keeps its id (a bf16 run gets a new one)
IN_RUN_ID_UNLESS = {"train.precision": "fp32", "train.tf32": True, "train.eval_size": 0,
                    "train.deterministic": False, "workload.lstm": "fused", "workload.downsample": 1,
                    "parallel.grad_reduction": "engine", "parallel.ddp_bucket_mb": None}


#: keys added after run config files were first written by the workflow, written into a run's
#: config file only where they differ from this value. The file's text is a Snakemake param
#: (workflows/train.smk): a new key with a default would change every run's text, and Snakemake
#: would train every finished run again. A key added from now on goes here (and, if it changes
#: results, in IN_RUN_ID_UNLESS too); tests/test_config_text.py holds every planned run's text fixed.
TEXT_UNLESS: dict[str, Any] = {"parallel.grad_reduction": "engine", "parallel.ddp_bucket_mb": None,
                              "launch.allocator": "system"}


def _pop_at(d: dict, key: str, unless: dict[str, Any] | None = None) -> None:
    """Remove dotted `key` from nested `d` (where `unless` names it: only at that value)."""
    *path, last = key.split(".")
    node = d
    for part in path:
        node = node.get(part, {})
    if unless is None or key not in unless or node.get(last, unless[key]) == unless[key]:
        node.pop(last, None)


def to_text_dict(cfg: RunConfig) -> dict[str, Any]:
    """`to_dict` as a run's config file holds it: `TEXT_UNLESS` keys only where they are not at
    their default (loading the file gives the same config)."""
    d = to_dict(cfg)
    for key in TEXT_UNLESS:
        _pop_at(d, key, TEXT_UNLESS)
    return d


def run_id(cfg: RunConfig) -> str:
    """12 hex digits of the hash of everything that changes the results.

    Left out: the label, the launch section (launcher, threads, port, timeouts, data root), whether the
    final model is saved, how often to checkpoint, which probes are logged (measurements that
    never change the training) and whether torch.compile runs; `IN_RUN_ID_UNLESS` keys at their
    default (so ids made before those keys existed stay valid); so a run shared by several figures has
    one id and runs once. In: the workload's data version, so regenerated embedded data
    gives new ids instead of stale results.
    """
    d = to_dict(cfg)
    for key in NOT_IN_RUN_ID + tuple(IN_RUN_ID_UNLESS):
        _pop_at(d, key, IN_RUN_ID_UNLESS)
    d["data_version"] = data_version(cfg.workload.name)
    blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def dump(cfg: RunConfig, path: str | os.PathLike) -> None:
    from .runlog import atomic_write_text
    atomic_write_text(path, yaml.safe_dump(to_text_dict(cfg), sort_keys=False))


algorithm_registry.load_plugins()   # last: a plugin module may import this one
