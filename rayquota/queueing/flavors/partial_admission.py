"""Partial admission (Kueue's ``minCount``): the largest pod counts that can be had.

When a workload does not fit whole (and preemption cannot make room for it whole), a workload
whose pod sets allow fewer pods (``PodSet.min_count``) is tried with fewer. As Kueue's
scheduler does, the counts go down together along one line: step ``k`` of ``total`` (the sum
over pod sets of ``count - min_count``) takes ``floor((count - min_count) * k / total)`` pods
off each pod set, and a binary search over ``k`` finds the smallest step that can be had.
The search assumes fewer pods never fit worse; it asks ``fits`` about O(log total) count
vectors, not about every one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from ..model import PodSet

R = TypeVar("R")


def allows_partial(pod_sets: Sequence[PodSet]) -> bool:
    """Some pod set may be admitted with fewer pods than it asks for."""
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in pod_sets)


def _deltas(pod_sets: Sequence[PodSet]) -> list[int]:
    """How many pods each pod set may give up (none without a ``min_count``)."""
    return [0 if ps.min_count is None else max(0, ps.count - max(ps.min_count, 0)) for ps in pod_sets]


def reduced(pod_sets: Sequence[PodSet], deltas: Sequence[int], step: int, total: int) -> tuple[PodSet, ...]:
    """The pod sets at ``step`` of ``total`` on the way from their counts to their minimums."""
    return tuple(
        ps if delta == 0 else replace(ps, count=ps.count - delta * step // total)
        for ps, delta in zip(pod_sets, deltas, strict=True)
    )


def largest_fitting(pod_sets: Sequence[PodSet], fits: Callable[[tuple[PodSet, ...]], R | None]) -> R | None:
    """``fits``' answer for the largest reduced counts it accepts (``None`` from it: does not
    fit), or ``None`` when not even the minimums fit or no pod set may be reduced."""
    deltas = _deltas(pod_sets)
    total = sum(deltas)
    if total == 0:
        return None
    low, high = 0, total + 1
    best: R | None = None
    while low < high:
        step = (low + high) // 2
        answer = fits(reduced(pod_sets, deltas, step, total))
        if answer is None:
            low = step + 1
        else:
            best, high = answer, step
    return best
