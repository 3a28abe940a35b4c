"""Projected wall time of a frontier run on a two-group network: analysis/alpha_beta.py's model
(`project`, which benchmarks/projected_walltime.py applies at 8-256 workers) applied to the run's
measured compute time per update and its measured between-group bytes, at the run's own layout
(2 workers, one per group).

At 2 ranks a ring all-reduce, a broadcast and an all-gather each send their payload once per
rank, so the payload per exchange is bytes-per-update x period; each method keeps the model's
cost form (how its exchanges are sequenced and how many messages they take), as its registration
names it (codist.algorithms.registry.CommForm.sequence): all-reduce and PowerSGD as the flat ring
every update (PowerSGD's payload is its compressed factors, what the meter counted),
codistillation as two broadcasts per exchange, MA-DNN and DiLoCo as an all-reduce and EC-DNN as
an all-gather per round.
"""
from __future__ import annotations

from analysis.alpha_beta import project
from codist.algorithms.registry import lookup

# benchmarks/projected_walltime.py's default network: fast tier 100 GB/s, 5 us; slow tier 50 us per message
NET = {"alpha_f": 5e-6, "beta_f": 100e9, "alpha_s": 50e-6, "shared": False}


def cost_form(algorithm: str) -> str:
    """The algorithm's cost form, as its registration's communication form says (`comm.sequence`)."""
    form = lookup(algorithm).comm
    if form is None:
        raise ValueError(f"algorithm {algorithm!r} registers no communication form (comm=CommForm(...)): its "
                         f"frontier point cannot be projected")
    return form.sequence


def step_seconds(algorithm: str, period: int | None, between_bytes: float, compute_s: float, gbps: float) -> float:
    """Seconds per update (serial: compute, then communication) with `gbps` Gb/s between the groups;
    `period`: the point's knob, the updates between exchanges where the algorithm has a period."""
    form = cost_form(algorithm)
    per = period if lookup(algorithm).period else 1
    payload = between_bytes * per
    r = project(form, per, 2, payload, payload, compute_s, {**NET, "beta_s": gbps * 1e9 / 8})
    assert abs(r["bytes_between"] - between_bytes) <= 1e-9 * max(1.0, between_bytes), (algorithm, r)
    return r["step_serial_s"]
