"""The Pareto front of (bytes, quality) points: fewer bytes and better quality are both wanted."""
from __future__ import annotations


def pareto_front(points: list[tuple[float, float]], higher_is_better: bool) -> list[bool]:
    """For each (bytes, quality) point, whether no other point is at least as good on both axes
    and strictly better on one (equal points are both on the front)."""
    sign = 1.0 if higher_is_better else -1.0
    q = [(b, sign * v) for b, v in points]
    return [not any(bo <= b and vo >= v and (bo < b or vo > v) for bo, vo in q) for b, v in q]
