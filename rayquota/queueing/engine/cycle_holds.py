"""Quota set aside for the rest of one cycle, as Kueue adds it to its cycle's snapshot.

Two kinds of workload hold quota they were not admitted to, until the cycle ends:

- a preemptor holds what it needs beyond what its victims in its own queue free, so a later
  workload of the same cycle cannot count on that quota (Kueue adds the preemptor's usage to the
  snapshot with its victims taken out, and skips a second preemption that would only fit by the
  same quota). Victims in other queues still count as holding theirs until the cycle ends: a
  second reclaim in the same tree waits a cycle where Kueue might issue it at once;
- a workload that needs preemption but may preempt nobody holds the part of its queue's quota it
  is entitled to, unless its queue can always reclaim lent quota (``reclaimWithinCohort: Any``):
  otherwise that quota would be lent to a borrower the queue could never take it back from
  (Kueue's ``reserveCapacityForUnreclaimablePreempt``).

The holds are charged on the cohort tree like admitted usage and given back when the cycle ends.
A workload that did not fit while its tree held quota is not parked: the next cycle judges it
again, without the holds (Kueue requeues it the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model import FlavorResource
from ..policies import ReclaimWithinCohortPolicy
from ..quota.accounting import Accounting
from ..quota.cohorts import QuotaNode, add_usage
from ..quota.state import ClusterQueueState, WorkloadState


class CycleHolds:
    def __init__(self, accounting: Accounting) -> None:
        self._accounting = accounting
        self._held: list[tuple[ClusterQueueState, FlavorResource, int]] = []
        self.roots: set[QuotaNode] = set()
        """The cohort trees where quota is held this cycle for workloads that found no victim."""
        self._targeted: set[str] = set()
        """Workloads this cycle's preemptions evict: another preemption counting on them waits."""

    def target(self, victims: Iterable[WorkloadState]) -> None:
        self._targeted.update(v.key for v in victims)

    def overlaps(self, victims: Iterable[WorkloadState]) -> bool:
        """Would these victims be counted twice (Kueue skips preemptions with overlapping targets)?"""
        return any(v.key in self._targeted for v in victims)

    def hold(
        self, cq: ClusterQueueState, amounts: Mapping[FlavorResource, int], *, unreclaimable: bool
    ) -> None:
        """Set ``amounts`` aside in ``cq`` until :meth:`release`; nothing for a queue outside a
        cohort (only its own workloads could take the quota, and they wait behind this one).
        ``unreclaimable``: held for a workload that found no victim, which nothing will wake, so
        what fails in its tree is judged again next cycle (a preemptor's hold goes when its
        victims release their quota, which wakes the tree anyway)."""
        if cq.node.parent is None:
            return
        held = False
        for fr, amount in amounts.items():
            if amount > 0:
                add_usage(cq.node, fr, amount)
                self._held.append((cq, fr, amount))
                held = True
        if held:
            if unreclaimable:
                self.roots.add(cq.node.root())
            self._accounting.usage_changed(cq)

    def release(self) -> None:
        for cq, fr, amount in reversed(self._held):
            add_usage(cq.node, fr, -amount)
            self._accounting.usage_changed(cq)
        self._held = []
        self.roots = set()
        self._targeted = set()


def preemptor_hold(
    cq: ClusterQueueState, need: Mapping[FlavorResource, int], victims: Iterable[WorkloadState]
) -> dict[FlavorResource, int]:
    """What a preemptor holds for the rest of the cycle: its need less its own queue's victims'."""
    freed: dict[FlavorResource, int] = {}
    for victim in victims:
        if victim.cluster_queue == cq.name:
            for fr, amount in victim.usage.items():
                freed[fr] = freed.get(fr, 0) + amount
    return {fr: amount - freed.get(fr, 0) for fr, amount in need.items()}


def unreclaimable_reserve(
    cq: ClusterQueueState, need: Mapping[FlavorResource, int]
) -> dict[FlavorResource, int]:
    """What a workload that found no victim keeps from others for the rest of the cycle: its own
    queue's unused quota up to its need (up to its borrowing limit where the need alone exceeds
    the nominal quota), nothing when the queue can always reclaim what it lends."""
    if cq.spec.preemption.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY:
        return {}
    node = cq.node
    out: dict[FlavorResource, int] = {}
    for fr, amount in need.items():
        quota = node.quota.get(fr)
        if quota is None:
            continue
        used = node.usage.get(fr, 0)
        if amount <= quota.nominal:
            out[fr] = max(0, min(amount, quota.nominal - used))
        elif quota.borrowing_limit is None:
            out[fr] = amount
        else:
            out[fr] = max(0, min(amount, quota.nominal + quota.borrowing_limit - used))
    return out
