"""Weighted dominant resource shares, and fair sharing's settings.

:func:`dominant_share` orders a cycle's queues: how much a queue borrows beyond its nominal
quota, as a fraction of what its cohort can lend, taking the worst resource, divided by the
queue's weight; integers in parts per million keep ordering exact.

:class:`ShareMeter` measures any node of the cohort tree as Kueue does for fair-sharing
preemption (:mod:`..preemption.fair_victims`): usage beyond the node's subtree quota, per mille of what
its parent could lend it (summed over flavors per resource), the largest over resources, divided
by the node's ``fairSharing.weight``; a node of weight 0 that borrows has an infinite share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..model import FlavorResource
from .cohorts import QuotaNode, potential_available
from .state import ClusterQueueState

UNBOUNDED = 1 << 62


def dominant_share(cq: ClusterQueueState, extra: Mapping[FlavorResource, int] | None = None) -> int:
    node = cq.node
    parent = node.parent
    if parent is None:
        return 0
    worst = 0
    frs = set(node.usage) | set(extra or ())
    for fr in frs:
        used = node.usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0)
        borrowed = used - node.subtree.get(fr, 0)
        if borrowed <= 0:
            continue
        lendable = parent.subtree.get(fr, 0)
        share = UNBOUNDED if lendable <= 0 else borrowed * 1_000_000 // lendable
        worst = max(worst, share)
    if worst == 0:
        return 0
    if cq.weight_milli <= 0:
        return UNBOUNDED
    return min(UNBOUNDED, worst * 1000 // cq.weight_milli)


# --- Kueue's dominant resource share, through the cohort tree --------------------------------


class PreemptionStrategy(Enum):
    """Kueue's ``fairSharing.preemptionStrategies`` values: when a fair-sharing preemption may
    take a workload of another queue, comparing the preemptor's share (with its workload) with
    the target's."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    """The target's share after losing the workload stays at or above the preemptor's."""
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
    """The target's share before the preemption is above the preemptor's."""


_FINAL = PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
_INITIAL = PreemptionStrategy.LESS_THAN_INITIAL_SHARE
VALID_STRATEGY_LISTS = ((_FINAL,), (_INITIAL,), (_FINAL, _INITIAL))
"""The lists Kueue accepts (the second strategy, if any, is only ever LessThanInitialShare)."""


@dataclass(frozen=True, slots=True)
class FairSharing:
    """Fair sharing's settings (Kueue's Configuration ``fairSharing``)."""

    preemption_strategies: tuple[PreemptionStrategy, ...] = (_FINAL, _INITIAL)

    def __post_init__(self) -> None:
        if self.preemption_strategies not in VALID_STRATEGY_LISTS:
            given = ",".join(s.value for s in self.preemption_strategies) or "(empty)"
            allowed = "; ".join(",".join(s.value for s in v) for v in VALID_STRATEGY_LISTS)
            raise ValueError(f"fairSharing.preemptionStrategies: {given!r} is not one of: {allowed}")

    @classmethod
    def parse(cls, strategies: Sequence[str] | None) -> FairSharing:
        """From the configuration's words; unset means Kueue's default (both, final share first)."""
        if strategies is None:
            return cls()
        known = {s.value: s for s in PreemptionStrategy}
        unknown = [s for s in strategies if s not in known]
        if unknown:
            raise ValueError(
                f"fairSharing.preemptionStrategies: unknown strategy {unknown[0]!r} "
                f"(known: {', '.join(known)})"
            )
        return cls(tuple(known[s] for s in strategies))


def fair_sharing_of(value: bool | FairSharing | None) -> FairSharing | None:
    """``True`` is Kueue's default settings; ``False``/``None`` is fair sharing off."""
    if isinstance(value, FairSharing):
        return value
    return FairSharing() if value else None


@dataclass(frozen=True, slots=True)
class Share:
    """A node's dominant resource share (Kueue's DRS): the largest, over resources, of what it
    uses beyond its subtree's quota per mille of what its parent could lend it, then divided by
    its weight."""

    ratio: float
    weight: float
    borrowing: bool

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def weighted(self) -> float:
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight


NEGATIVE_SHARE = Share(-1.0, 1.0, False)
"""Below every share: the start of a search for the largest."""


def compare_shares(a: Share, b: Share) -> int:
    """-1, 0 or 1 as ``a`` is smaller, equal or larger (larger: preempted from first)."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        x, y = a.ratio, b.ratio
    elif a.zero_weight_borrows:
        return 1
    elif b.zero_weight_borrows:
        return -1
    else:
        x, y = a.weighted(), b.weighted()
    return (x > y) - (x < y)


class ShareMeter:
    """Measures shares of nodes of one cohort tree; what a parent can lend depends on quota
    only, so it is computed once per parent and kept while quotas do not change."""

    def __init__(self) -> None:
        self._lendable: dict[int, dict[str, int]] = {}

    def lendable(self, parent: QuotaNode) -> dict[str, int]:
        """Per resource, summed over flavors, what ``parent`` could give one child at most."""
        found = self._lendable.get(id(parent))
        if found is None:
            found = {}
            for fr in parent.root().subtree:
                found[fr[1]] = found.get(fr[1], 0) + potential_available(parent, fr)
            self._lendable[id(parent)] = found
        return found

    def share(self, node: QuotaNode) -> Share:
        parent = node.parent
        if parent is None:
            return Share(0.0, node.weight, False)
        borrowed: dict[str, int] = {}
        usage = node.usage
        for fr, quota in node.subtree.items():
            over = usage.get(fr, 0) - quota
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
        if not borrowed:
            return Share(0.0, node.weight, False)
        lendable = self.lendable(parent)
        ratio = 0.0
        for resource, amount in borrowed.items():
            can_lend = lendable.get(resource, 0)
            if can_lend > 0:
                ratio = max(ratio, amount * 1000.0 / can_lend)
        return Share(ratio, node.weight, True)
