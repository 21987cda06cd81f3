"""Weighted dominant resource share of a ClusterQueue within its cohort.

The share is how much a queue borrows beyond its nominal quota, as a
fraction of what its cohort can lend, taking the worst resource, divided by
the queue's weight. Integers in parts per million keep ordering exact.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import FlavorResource
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
