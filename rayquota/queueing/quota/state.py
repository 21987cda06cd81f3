"""Mutable per-ClusterQueue and per-workload state kept by the engine."""

from __future__ import annotations

import heapq
import itertools
import sys
from collections.abc import Iterator
from enum import StrEnum

from ..decisions import PodSetAssignment
from ..model import ClusterQueue, FlavorResource, ResourceGroup, Workload
from ..policies import StopPolicy
from .cohorts import QuotaNode

NOTHING_PARKED = -(1 << 62)
"""``parked_top`` of a queue with nothing parked: below every priority."""

Order = tuple[int, float, int, int]
"""Queue order, smallest first: (-priority, queue order time, sequence, arrival in the engine);
the time is :func:`~..queue_order.queue_order_time` of the workload."""


class Phase(StrEnum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    EVICTING = "Evicting"
    """Preempted or drained: pods are being removed, quota is still held."""


class WorkloadState:
    __slots__ = (
        "admitted_at",
        "admitted_cycle",
        "admitted_seq",
        "awaiting",
        "cluster_queue",
        "drop_on_release",
        "group",
        "key",
        "likeness",
        "order",
        "phase",
        "pod_sets",
        "reason",
        "seq",
        "shape",
        "spec",
        "successor",
        "usage",
    )

    def __init__(self, spec: Workload, seq: int, queued_at: float) -> None:
        """``queued_at``: the workload's queue order time (:func:`~..queue_order.queue_order_time`)."""
        self.spec = spec
        self.key = spec.key
        self.seq = seq
        self.order: Order = (-spec.priority, queued_at, spec.sequence, seq)
        self.shape = _shape(spec)
        self.likeness = _likeness(spec, self.shape)
        self.group: PendingGroup | None = None
        """The parked or woken group holding this pending workload (``None``: awake on its own)."""
        self.phase = Phase.PENDING
        self.cluster_queue: str | None = None
        self.usage: dict[FlavorResource, int] = {}
        self.pod_sets: tuple[PodSetAssignment, ...] = ()
        self.admitted_seq = 0
        self.admitted_cycle = -1
        self.admitted_at = 0.0
        self.reason = ""
        self.awaiting: set[str] | frozenset[str] = NOTHING_AWAITED
        self.drop_on_release = False
        self.successor: str | None = None

    @property
    def queued_at(self) -> float:
        """The queue order time: creation, or for some evictions the eviction's time."""
        return self.order[1]

    def set_spec(self, spec: Workload, queued_at: float) -> None:
        self.spec = spec
        self.order = (-spec.priority, queued_at, spec.sequence, self.seq)
        self.shape = _shape(spec)
        self.likeness = _likeness(spec, self.shape)


Shape = tuple[object, ...]


NOTHING_AWAITED: frozenset[str] = frozenset()
"""``awaiting`` of a workload that waits for no victim (one empty set, not one per workload)."""


class Shared:
    """One copy of each equal immutable value (a workload's shape and likeness): 50,000 pending
    workloads of three shapes held 50,000 equal tuples of tuples, a kilobyte each. A value only
    this table holds any more is dropped each time the table has doubled."""

    def __init__(self) -> None:
        self._values: dict[Shape, Shape] = {}
        self._sweep_at = 1024

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __call__(self, value: Shape) -> Shape:
        found = self._values.setdefault(value, value)
        if len(self._values) >= self._sweep_at:
            self.sweep()
        return found

    def sweep(self) -> None:
        self._values = {k: k for k, count in _refcounts(self._values) if count > _ALONE}
        self._sweep_at = max(1024, 2 * len(self._values))


def _refcounts(table: dict[Shape, Shape]) -> list[tuple[Shape, int]]:
    return [(k, sys.getrefcount(v)) for k, v in table.items()]


def _alone() -> int:
    """What :func:`_refcounts` says of a value that is both key and value of its table and held
    by nothing else (measured, not assumed: interpreters differ)."""
    value: Shape = (object(),)
    probe = {value: value}
    del value
    return _refcounts(probe)[0][1]


_ALONE = _alone()


SHARED = Shared()
"""Shapes and likenesses of every engine in the process (immutable values: sharing them between
engines, the dashboard's copy and the operator's, changes nothing)."""


def _shape(spec: Workload) -> Shape:
    """A hashable summary of everything flavor assignment looks at (not priority or time)."""
    return SHARED(_shape_of(spec))


def _shape_of(spec: Workload) -> Shape:
    return tuple(
        (
            ps.name,
            ps.count,
            tuple(sorted(ps.requests.items())),
            tuple(sorted(ps.node_selector.items())),
            ps.tolerations,
            ps.topology_request,
            ps.min_count,
            ps.node_affinity,
        )
        for ps in spec.pod_sets
    )


def _likeness(spec: Workload, shape: Shape) -> Shape:
    """Everything a cycle looks at besides the workload's place in line: two pending workloads
    of one ClusterQueue with the same likeness get the same verdict while usage stays put.
    A replacement slice is judged against its own predecessor, so it is like no other."""
    return SHARED(
        (shape, spec.priority, spec.namespace, spec.queue_name, spec.key if spec.replaces else None)
    )


_TOLD = itertools.count(1)
"""Orders the verdicts groups are told, engine-wide."""


class PendingGroup:
    """Pending workloads of one ClusterQueue that admission cannot tell apart (same likeness).

    When one of them does not fit, none of the others would in the same state, so they are
    parked, woken and judged as one: a cycle looks at the first in line and stops at the first
    that does not fit, instead of re-judging every member (Kueue keeps such workloads in its
    inadmissible set for the same reason). ``reason`` is the verdict the last judged member got;
    when two groups merge, the one told last keeps its words (``told`` orders them).
    """

    __slots__ = ("_heap", "_reason", "awake", "key", "members", "told")

    def __init__(self, key: Shape, awake: bool) -> None:
        self.key = key
        self.awake = awake
        self.members: dict[str, WorkloadState] = {}
        self._heap: list[tuple[Order, str]] = []
        self._reason = ""
        self.told = 0

    @property
    def reason(self) -> str:
        return self._reason

    @reason.setter
    def reason(self, reason: str) -> None:
        self._reason = reason
        self.told = next(_TOLD)

    def __len__(self) -> int:
        return len(self.members)

    def add(self, wl: WorkloadState) -> None:
        self.members[wl.key] = wl
        heapq.heappush(self._heap, (wl.order, wl.key))
        wl.group = self

    def remove(self, wl: WorkloadState) -> None:
        if self.members.pop(wl.key, None) is not None:
            wl.group = None
            # Entries of removed members are dropped lazily; rebuild when they dominate.
            if len(self._heap) > 2 * len(self.members) + 16:
                self._heap = [(m.order, m.key) for m in self.members.values()]
                heapq.heapify(self._heap)

    def head(self) -> WorkloadState | None:
        """The member first in line (priority, then creation, then arrival)."""
        heap = self._heap
        while heap:
            order, key = heap[0]
            wl = self.members.get(key)
            if wl is not None and wl.order == order:
                return wl
            heapq.heappop(heap)
        return None

    def absorb(self, other: PendingGroup) -> PendingGroup:
        """Merge ``other`` into this group of the same likeness; returns the one that holds
        everybody now, with the words of the group told last."""
        big, small = (self, other) if len(self) >= len(other) else (other, self)
        for wl in small.members.values():
            big.add(wl)
        small.members.clear()
        small._heap.clear()
        newest = other if other.told >= self.told else self
        if newest is not big:
            big.reason = newest.reason
        return big


class ClusterQueueState:
    """A ClusterQueue's spec plus its pending queue and admitted set.

    Pending workloads are *awake* (looked at by the next cycle: one by one in ``active``, or
    as woken groups in ``awake_groups``) or *parked* (``parked_groups``: they did not fit and
    wait for something in this queue's cohort tree to change; no cycle looks at them).
    """

    def __init__(self, spec: ClusterQueue, node: QuotaNode) -> None:
        self.spec = spec
        self.node = node
        self.active: dict[str, WorkloadState] = {}
        # Keyed by identity: a group woken while a cycle holds another of the same likeness
        # stays apart, so a cycle only ever judges what was awake when it started.
        self.awake_groups: dict[int, PendingGroup] = {}
        self.parked_groups: dict[Shape, PendingGroup] = {}
        self.admitted: dict[str, WorkloadState] = {}
        self.parked_top = NOTHING_PARKED
        """The highest priority among parked workloads (an upper bound until the next unpark)."""
        self.group_of: dict[str, ResourceGroup] = {}
        self.selector_keys: dict[int, frozenset[str]] = {}
        self.weight_milli = round(spec.fair_sharing_weight * 1000)
        self.set_spec(spec, node)

    def set_spec(self, spec: ClusterQueue, node: QuotaNode) -> None:
        self.spec = spec
        self.node = node
        self.weight_milli = round(spec.fair_sharing_weight * 1000)
        self.group_of = {}
        self.selector_keys = {}
        for group in spec.resource_groups:
            for resource in group.covered_resources:
                self.group_of[resource] = group
            for flavor in group.flavors:
                for resource in flavor.resources:
                    self.group_of.setdefault(resource, group)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stopped(self) -> bool:
        return self.spec.stop_policy is not StopPolicy.NONE

    # ------------------------------------------------------------ the pending queue

    def add_pending(self, wl: WorkloadState, *, join_look_alikes: bool) -> None:
        """A workload joins the queue. With ``join_look_alikes`` it joins its look-alikes if
        some wait: awake ones (the next cycle judges it in line with them) or parked ones (it
        would fail as they did). Otherwise, or with none waiting, it is awake on its own, and
        shows no verdict until a cycle judges it, whether its look-alikes are parked or awake
        (a rebuild of the quota tree wakes parked groups: that must not change what it shows)."""
        if join_look_alikes:
            awake = self._awake_group_like(wl)
            if awake is not None:
                awake.add(wl)
                return
            group = self.parked_groups.get(wl.likeness)
            if group is not None:
                group.add(wl)
                self.parked_top = max(self.parked_top, wl.spec.priority)
                return
        self.active[wl.key] = wl

    def _awake_group_like(self, wl: WorkloadState) -> PendingGroup | None:
        for group in self.awake_groups.values():  # a handful: one per likeness, rarely two
            if group.key == wl.likeness:
                return group
        return None

    def remove_pending(self, wl: WorkloadState) -> None:
        if self.active.pop(wl.key, None) is not None:
            return
        group = wl.group
        if group is not None:
            group.remove(wl)
            if not group.members:
                if group.awake:
                    self.awake_groups.pop(id(group), None)
                elif self.parked_groups.get(group.key) is group:
                    del self.parked_groups[group.key]

    def park(self, wl: WorkloadState) -> None:
        """An awake workload did not fit (its ``reason`` says why): park it with its likes."""
        if self.active.pop(wl.key, None) is None:
            return
        group = self.parked_groups.get(wl.likeness)
        if group is None:
            group = self.parked_groups[wl.likeness] = PendingGroup(wl.likeness, awake=False)
        group.add(wl)
        group.reason = wl.reason
        self.parked_top = max(self.parked_top, wl.spec.priority)

    def park_group(self, group: PendingGroup) -> None:
        """The rest of a woken group would fail as its last judged member did: park it whole."""
        self.awake_groups.pop(id(group), None)
        if not group.members:
            return
        group.awake = False
        parked = self.parked_groups.get(group.key)
        if parked is not None:
            group = parked.absorb(group)
            group.awake = False
        self.parked_groups[group.key] = group
        head = group.head()
        if head is not None:
            self.parked_top = max(self.parked_top, head.spec.priority)

    def hold_with_look_alikes(self, wl: WorkloadState) -> None:
        """An awake workload waits behind a preemptor or a blocked head: it stays awake, in a
        group with its look-alikes, so the next cycle does not walk it one by one again."""
        if wl.awaiting or self.active.pop(wl.key, None) is None:
            return  # a preemptor waiting for its victims is looked at first, on its own
        group = self._awake_group_like(wl)
        if group is None:
            group = PendingGroup(wl.likeness, awake=True)
            self.awake_groups[id(group)] = group
        group.add(wl)
        group.reason = wl.reason

    def wake(self, wl: WorkloadState) -> None:
        """Take a woken group's member out of its group, to be judged on its own."""
        assert wl.group is not None and wl.group.awake
        self.remove_pending(wl)
        self.active[wl.key] = wl

    def unpark(self) -> None:
        for group in self.parked_groups.values():
            group.awake = True
            self.awake_groups[id(group)] = group
        self.parked_groups.clear()
        self.parked_top = NOTHING_PARKED

    @property
    def has_parked(self) -> bool:
        return bool(self.parked_groups)

    def has_awake(self) -> bool:
        return bool(self.active) or bool(self.awake_groups)

    def awake_workloads(self) -> Iterator[WorkloadState]:
        yield from self.active.values()
        for group in self.awake_groups.values():
            yield from group.members.values()

    def pending_workloads(self) -> list[WorkloadState]:
        parked = [wl for group in self.parked_groups.values() for wl in group.members.values()]
        return [*self.awake_workloads(), *parked]

    def pending_counts(self) -> tuple[int, int]:
        """(awake, parked): Kueue's active and inadmissible pending workloads."""
        awake = len(self.active) + sum(len(g) for g in self.awake_groups.values())
        return awake, sum(len(g) for g in self.parked_groups.values())

    def first_awake(self) -> WorkloadState | None:
        heads = [g.head() for g in self.awake_groups.values()]
        candidates = [*self.active.values(), *(h for h in heads if h is not None)]
        return min(candidates, key=lambda wl: wl.order) if candidates else None
