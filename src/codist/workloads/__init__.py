"""Workloads, by `workload.name`: the workload registry.

One `register(...)` per workload names its config class, its workload class and what the rest of
codist reads about it: the metrics it logs and their directions (the analysis), its data version
(the run id), its real data's needs before launch (`codist.launching.inputs`) and its data check (`codist
data check`), and its throughput-table model and units (the budget, `codist.budget`). The
built-ins register in their torch-free `<name>_config.py`, found by file name; other modules
register the same way and are imported through `CODIST_PLUGINS` (as algorithms are:
codist.algorithms.registry.load_plugins); a registration after `codist.config` was imported
updates its schema (`on_change`).

Importing this package is cheap (pydantic only): the run-config schema needs the config
classes, and Snakemake parses configs often. The workload classes (torch, data, models) are
imported when a workload is built.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from .schema import SectionRegistry, WorkloadSection, load_plugins


class DataNeeds(NamedTuple):
    """What a workload's real data set needs under its data folder, checked before launch."""
    folders: list[Path]
    files: list[Path]
    layout: str                      # the expected layout, said in every message
    problem: str | None = None       # a further problem found (the LM's: no text shard), one line


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    config: type[WorkloadSection]
    workload: str | type             # "module:Class" (imported when built) or the base.Workload subclass
    # every metric it logs (its finalize_eval, plus what the analysis derives from them) -> higher is
    # better (None: no direction); the training loop's own metrics are codist.workloads.metrics.LOOP
    metrics: Mapping[str, bool | None] = field(default_factory=dict)
    data_version: int = 1            # bump when its generated data or model definition changes (new run ids)
    # before launch: the workload section and its data folder -> what the real data set needs there
    # (codist.launching.inputs); None: it reads no data folder
    data_needs: Callable[[Any, Path], DataNeeds] | None = None
    # `codist data check`: "module:function" or the function, (data folder, **the section's options)
    # -> (problems, notes); None: nothing to check
    data_check: str | Callable | None = None
    # the budget (codist.budget): the section -> the throughput table's model name; the section and
    # the table -> units (images, samples, tokens) per sample (None: 1)
    throughput_model: Callable[[Any], str] | None = None
    units_per_sample: Callable[[Any, Any], float] | None = None
    # a YAML of replications/throughput.yaml's form whose models join it (a plugin's own rates)
    throughput: str | Path | None = None

    def workload_class(self) -> type:
        return _resolve(self.workload)

    def check_function(self) -> Callable | None:
        return None if self.data_check is None else _resolve(self.data_check)


def _resolve(ref: str | Callable):
    """A "module:name" reference (imported now) or the object itself."""
    if not isinstance(ref, str):
        return ref
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


_REGISTRY = SectionRegistry("workload", WorkloadSection, __name__, WorkloadSpec)
register = _REGISTRY.register          # register(name, config, workload, **capabilities): a valid section
specs = _REGISTRY.specs
config_union = _REGISTRY.config_union  # the `workload:` section's type
on_change = _REGISTRY.on_change


def spec(name: str) -> WorkloadSpec:
    """Workload `name`'s registration: the built-ins' and the CODIST_PLUGINS modules' (imported here
    when needed, for readers outside a run: the analysis); one line if there is none."""
    if name not in specs():
        load_plugins()
    if name not in specs():
        raise KeyError(f"workload {name!r} is not registered (known: {', '.join(sorted(specs()))}; a plugin's "
                       f"module must be in CODIST_PLUGINS)")
    return specs()[name]


class _Registry(Mapping):
    """name -> (config class, workload class reference), the registrations' live view."""

    def __getitem__(self, name: str):
        s = spec(name)
        return s.config, s.workload

    def __iter__(self) -> Iterator[str]:
        return iter(specs())

    def __len__(self) -> int:
        return len(specs())


REGISTRY = _Registry()


def data_version(name: str) -> int:
    return spec(name).data_version


def data_versions() -> dict[str, int]:
    return {name: s.data_version for name, s in specs().items()}


def workload_class(name: str):
    return spec(name).workload_class()


def build_workload(cfg, seed: int):
    """The workload object (a `base.Workload`) for a validated `workload:` config section."""
    return workload_class(cfg.name)(cfg, seed)


# The `workload:` section of a run config (rebuilt in codist.config when a plugin registers later).
WorkloadConfig = config_union()

__all__ = ["WorkloadConfig", "WorkloadSpec", "DataNeeds", "REGISTRY", "register", "spec", "specs",
           "build_workload", "workload_class", "data_version", "data_versions", "config_union", "on_change"]
