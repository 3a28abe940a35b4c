"""Every metric a run logs, per workload, and its direction (True: higher is better).

Each workload's registration names the metrics its `finalize_eval` writes and their directions
(`metrics=` in codist.workloads.register); the training loop's own metrics and those the analysis
derives are here. Torch-free, so the plan and the analysis read it cheaply, and checked against
what each workload's `finalize_eval` and the training loop really write
(tests/test_metric_directions.py): the analysis takes a metric's direction from here, never
from a list of its own.
"""
from __future__ import annotations

from typing import Iterator, Mapping

# written by the training loop for every workload (init_distance: when train.probes asks)
LOOP = {"train_loss": False, "distill_loss": None, "comm_bytes": None, "init_distance": None}
# derived by the analysis from the runs' rows or predictions
DERIVED = {"error_pct": False, "churn": False}


def directions() -> dict[str, bool | None]:
    """metric -> direction over the loop's, the derived and every registered workload's metrics; a
    name given two directions (by two workloads, or a workload and the loop) is one line."""
    from . import specs
    known = {**LOOP, **DERIVED}
    where = {m: "the training loop or the analysis" for m in known}
    for spec in specs().values():
        for metric, direction in spec.metrics.items():
            if metric in known and known[metric] != direction:
                raise ValueError(f"workload {spec.name!r}: metrics[{metric!r}] = {direction}, but {where[metric]} "
                                 f"gives {metric!r} the direction {known[metric]}; one metric name has one direction")
            known.setdefault(metric, direction)
            where.setdefault(metric, f"workload {spec.name!r}")
    return known


def _specs() -> dict:
    from . import specs
    return specs()


class _Directions(Mapping):
    """`directions()` as a mapping."""

    def _all(self) -> dict[str, bool | None]:
        return directions()

    def __getitem__(self, metric: str):
        return self._all()[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class _Logged(Mapping):
    """workload -> every metric its runs log (its own, then the loop's)."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        from . import spec
        return tuple(spec(name).metrics) + tuple(LOOP)

    def __iter__(self) -> Iterator[str]:
        return iter(_specs())

    def __len__(self) -> int:
        return len(_specs())


DIRECTIONS = _Directions()
LOGGED = _Logged()


def higher_is_better(metric: str) -> bool:
    """The metric's direction; a metric without one (a count, a rate) is an error to compare. A
    metric no registration names yet may be a CODIST_PLUGINS workload's: those are imported first."""
    if metric not in DIRECTIONS:
        from .schema import load_plugins
        load_plugins()
    if DIRECTIONS.get(metric) is None:
        have = sorted(k for k, v in DIRECTIONS.items() if v is not None)
        raise ValueError(f"metric {metric!r} has no better direction; comparable metrics: {have}")
    return DIRECTIONS[metric]
