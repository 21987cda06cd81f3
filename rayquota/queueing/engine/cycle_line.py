"""One ClusterQueue's awake pending workloads, in line, as one admission cycle takes them.

Workloads awake on their own come one by one; a woken group of look-alikes shows only the
member first in line, and comes back with its next member once that one has been judged,
carrying the verdict its predecessor got (so the cycle can tell whether the rest of the group
would be judged the same and park it whole).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from ..quota.cohorts import QuotaNode
from ..quota.state import ClusterQueueState, Order, PendingGroup, WorkloadState


class VerdictBasis(Enum):
    STATIC = "static"
    """Nothing a cycle changes can alter it (a namespace selector, a stopped LocalQueue)."""
    CACHE = "cache"
    """Answered from (or written to) the cycle's fit caches: stands while they are not cleared."""
    USAGE = "usage"
    """Decided by the usage of one cohort tree: stands while that tree's usage is unchanged."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a judged group member did not fit, and what must stay unchanged for its look-alikes to
    fail the same way."""

    basis: VerdictBasis
    generation: int = 0
    """The fit caches' generation (CACHE) or the tree's usage epoch (USAGE)."""
    root: QuotaNode | None = None
    """The cohort tree whose usage decided it (USAGE)."""


STATIC_VERDICT = Verdict(VerdictBasis.STATIC)

LineKey = Order | tuple[float, Order]
"""A workload's place in line: its queue order, or under admission fair sharing its LocalQueue's
usage first (one line holds keys of one kind only)."""

_Entry = tuple[LineKey, WorkloadState, PendingGroup | None, Verdict | None]


class CycleLine:
    def __init__(
        self,
        cq: ClusterQueueState,
        skip: set[str],
        usage_of: Callable[[WorkloadState], float] | None = None,
    ) -> None:
        """``usage_of``: the usage of a workload's LocalQueue, with admission fair sharing (it
        only grows during a cycle, as admissions add their entry penalties)."""
        self.cq = cq
        self._usage_of = usage_of
        # Orders are unique (they end with the arrival number), so entries never compare further.
        self._heap: list[_Entry] = [
            (self._key(wl), wl, None, None) for wl in cq.active.values() if wl.key not in skip
        ]
        for group in cq.awake_groups.values():
            head = group.head()
            if head is not None:
                self._heap.append((self._key(head), head, group, None))
        heapq.heapify(self._heap)

    def _key(self, wl: WorkloadState) -> LineKey:
        return wl.order if self._usage_of is None else (self._usage_of(wl), wl.order)

    def first_order(self) -> Order | None:
        if not self._heap:
            return None
        self._refresh_first()
        return self._heap[0][1].order

    def _refresh_first(self) -> None:
        """Under admission fair sharing an entry's usage may have grown since it was pushed (its
        queue admitted): re-key stale entries until the first one is current."""
        if self._usage_of is None:
            return
        while True:
            key, wl, group, verdict = self._heap[0]
            fresh = self._key(wl)
            if fresh == key:
                return
            heapq.heapreplace(self._heap, (fresh, wl, group, verdict))

    def pop(self) -> tuple[WorkloadState, PendingGroup | None, Verdict | None]:
        self._refresh_first()
        _, wl, group, verdict = heapq.heappop(self._heap)
        return wl, group, verdict

    def push_back(self, wl: WorkloadState) -> None:
        """An awake workload popped but not judged: first in line again."""
        heapq.heappush(self._heap, (self._key(wl), wl, None, None))

    def push_group(self, group: PendingGroup, verdict: Verdict | None) -> None:
        head = group.head()
        if head is not None:
            heapq.heappush(self._heap, (self._key(head), head, group, verdict))

    def drain(self) -> Iterator[tuple[WorkloadState, PendingGroup | None]]:
        while self._heap:
            wl, group, _ = self.pop()
            yield wl, group
