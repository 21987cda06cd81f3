"""Mutable per-ClusterQueue and per-workload state kept by the engine."""

from __future__ import annotations

from enum import Enum

from .cohorts import QuotaNode
from .decisions import PodSetAssignment
from .model import ClusterQueue, FlavorResource, ResourceGroup, StopPolicy, Workload

Order = tuple[int, float, int, int]
"""Queue order, smallest first: (-priority, created, sequence, arrival in the engine)."""


class Phase(Enum):
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
        "key",
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

    def __init__(self, spec: Workload, seq: int) -> None:
        self.spec = spec
        self.key = spec.key
        self.seq = seq
        self.order: Order = (-spec.priority, spec.created, spec.sequence, seq)
        self.shape = _shape(spec)
        self.phase = Phase.PENDING
        self.cluster_queue: str | None = None
        self.usage: dict[FlavorResource, int] = {}
        self.pod_sets: tuple[PodSetAssignment, ...] = ()
        self.admitted_seq = 0
        self.admitted_cycle = -1
        self.admitted_at = 0.0
        self.reason = ""
        self.awaiting: set[str] = set()
        self.drop_on_release = False
        self.successor: str | None = None

    def set_spec(self, spec: Workload) -> None:
        self.spec = spec
        self.order = (-spec.priority, spec.created, spec.sequence, self.seq)
        self.shape = _shape(spec)


Shape = tuple[object, ...]


def _shape(spec: Workload) -> Shape:
    """A hashable summary of everything flavor assignment looks at (not priority or time)."""
    return tuple(
        (
            ps.name,
            ps.count,
            tuple(sorted(ps.requests.items())),
            tuple(sorted(ps.node_selector.items())),
            ps.tolerations,
        )
        for ps in spec.pod_sets
    )


class ClusterQueueState:
    """A ClusterQueue's spec plus its pending queue (active and parked) and admitted set."""

    def __init__(self, spec: ClusterQueue, node: QuotaNode) -> None:
        self.spec = spec
        self.node = node
        self.active: dict[str, WorkloadState] = {}
        # Parked workloads did not fit; they wait for capacity in this queue's
        # cohort tree to change and are never looked at by a cycle meanwhile.
        self.parked: dict[str, WorkloadState] = {}
        self.admitted: dict[str, WorkloadState] = {}
        self.parked_top = -(1 << 62)
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

    def unpark(self) -> None:
        if self.parked:
            self.active.update(self.parked)
            self.parked.clear()
        self.parked_top = -(1 << 62)

    def park(self, wl: WorkloadState) -> None:
        if self.active.pop(wl.key, None) is not None:
            self.parked[wl.key] = wl
            self.parked_top = max(self.parked_top, wl.spec.priority)

    def add_pending(self, wl: WorkloadState) -> None:
        self.active[wl.key] = wl

    def remove_pending(self, key: str) -> None:
        self.active.pop(key, None)
        self.parked.pop(key, None)
