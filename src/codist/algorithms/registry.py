"""The algorithm registry: one `register(...)` per algorithm names its config class, its strategy
and its capabilities (the exchange period's field, the runs it reads, extra models, the extra
forward passes the budget charges, its communication form, its label); nothing else in codist
knows an algorithm by name but config's default, `allreduce`, and the analysis reads the same
registrations (`lookup`).

Built-in algorithms register in the torch-free modules `codist/algorithms/*_config.py`, found
by their file name, and name their strategy as "module:Class", imported on first use: so
validating a config (`codist run`, the Snakemake plan) imports no torch. Other modules register
the same way; `CODIST_PLUGINS` (comma-separated module names) makes every process that imports
`codist.config` (`codist run`, the ranks, the plan) import them. Registering after
`codist.config` was imported updates its schema (`on_change`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ..workloads import schema
from ..workloads.schema import SectionRegistry
from .sections import AlgorithmSection


@dataclass(frozen=True)
class CommForm:
    """How an algorithm's training traffic follows from its model, for the analysis's byte identities
    (analysis/comm_identity.py) and the frontier's projected wall time: once per exchange period
    (every update without one) a rank sends `factor(ranks per model group, models)` times its
    message (the parameters or the whole state), measured by the summary's `column`, sequenced as
    analysis/alpha_beta.py's cost form `sequence`."""
    sequence: str                                        # allreduce_flat, codistill, model_average, ensemble_compress
    factor: Callable[[int, int], float] | None = None    # None: no closed form (PowerSGD's compressed factors)
    column: str = "comm_sent_bytes_per_rank_per_update"


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    config: type[AlgorithmSection]
    strategy: str | type          # "module:Class" (imported on first use) or the `base.Algorithm` subclass
    min_models: int | None = None  # None: trains one model (parallel.models must be 1); else at least this many
    reads_run: str | None = None   # config field holding the id of another run this run reads (trained first)
    period: str | None = None      # config field holding the updates between exchanges
    extra_models: tuple[str, ...] = ()   # evaluated besides the local models "0".."n-1" (ensembles, averages)
    # mean extra forward passes per update of a validated run config (teachers, members: the budget's
    # cost, codist.budget); None: none
    extra_forwards: Callable[[Any], float] | None = None
    label: str = ""                # how figures and tables name it (default: its name)
    knob: tuple[str, str] | None = None   # (symbol, field) a label shows beside it: ("k", "exchange_every")
    comm: CommForm | None = None   # its communication form; None: no byte identity or projection

    def title(self) -> str:
        return self.label or self.name

    def label_for(self, algorithm) -> str:
        """The label of a configured instance (a config section or its dict), e.g. "MA-DNN H=16"."""
        if self.knob is None:
            return self.title()
        symbol, field = self.knob
        value = algorithm[field] if isinstance(algorithm, dict) else getattr(algorithm, field)
        return f"{self.title()} {symbol}={value}"

    def strategy_class(self) -> type:
        if isinstance(self.strategy, str):
            module, cls = self.strategy.split(":")
            return getattr(importlib.import_module(module), cls)
        return self.strategy


_REGISTRY = SectionRegistry("algorithm", AlgorithmSection, __package__, AlgorithmSpec)
register = _REGISTRY.register          # register(name, config, strategy, **capabilities): a valid section
specs = _REGISTRY.specs
config_union = _REGISTRY.config_union  # the `algorithm:` section's type
on_change = _REGISTRY.on_change


def load_plugins() -> None:
    """Import the modules named in `CODIST_PLUGINS` (comma-separated). `codist.config` calls this
    once it is complete, so a plugin may import anything of codist's."""
    _REGISTRY.load()
    schema.load_plugins()


def spec(name: str) -> AlgorithmSpec:
    return specs()[name]


def model_names(algorithm: str, models: int) -> list[str]:
    """Every model a run evaluates: the local models "0".."n-1", then the algorithm's extra ones."""
    return [str(i) for i in range(models)] + list(spec(algorithm).extra_models)


def exchange_period(algorithm: AlgorithmSection) -> int | None:
    """Updates between the algorithm's exchanges (codistill k, MA/EC/DiLoCo tau or H), if it has one."""
    field = spec(algorithm.name).period
    return None if field is None else getattr(algorithm, field)


def lookup(name: str) -> AlgorithmSpec:
    """Algorithm `name`'s registration for readers outside a run (the analysis, the budget): the
    built-ins and the CODIST_PLUGINS modules' (imported here when needed); else one line."""
    if name not in specs():
        load_plugins()
    if name not in specs():
        raise KeyError(f"algorithm {name!r} is not registered (a plugin's module must be in CODIST_PLUGINS)")
    return specs()[name]


def period_field(name: str) -> str | None:
    """The config field holding algorithm `name`'s exchange period (None: it has none), for readers of
    a resolved config as plain data (the analysis)."""
    return lookup(name).period


def period_of(algorithm: dict) -> int:
    """Updates between exchanges of a resolved `algorithm:` section as plain data; 1 without a period."""
    field = period_field(algorithm["name"])
    return 1 if field is None else int(algorithm[field])


def upstream_run(algorithm: AlgorithmSection) -> str | None:
    """The id of the run this run reads (a two-phase student's teachers), if any."""
    field = spec(algorithm.name).reads_run
    return None if field is None else getattr(algorithm, field)
