"""What a scheduling cycle returns: typed decisions, never side effects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .model import FlavorResource


@dataclass(frozen=True, slots=True)
class TopologyDomain:
    """One domain of an assignment: its value at each of the assignment's levels, and how many
    of the pod set's pods go there."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go, in Kueue's shape: ``levels`` are node labels (only
    ``kubernetes.io/hostname`` when the topology ends at nodes, which names a node by itself),
    and each domain's values select its nodes."""

    levels: tuple[str, ...]
    domains: tuple[TopologyDomain, ...]

    @property
    def count(self) -> int:
        return sum(d.count for d in self.domains)

    def node_selectors(self) -> list[tuple[dict[str, str], int]]:
        """Per domain, the nodeSelector that pins a pod there, and how many pods go there."""
        return [(dict(zip(self.levels, d.values, strict=True)), d.count) for d in self.domains]


def trimmed(assignment: TopologyAssignment, count: int) -> TopologyAssignment:
    """The first ``count`` pods of an assignment (a scale-down gives back the last domains' pods)."""
    domains: list[TopologyDomain] = []
    left = count
    for domain in assignment.domains:
        if left <= 0:
            break
        take = min(domain.count, left)
        domains.append(TopologyDomain(domain.values, take))
        left -= take
    return TopologyAssignment(assignment.levels, tuple(domains))


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """The flavor chosen for each resource of one pod set, and the pod count admitted."""

    name: str
    count: int
    flavors: Mapping[str, str]
    """resource -> flavor"""
    usage: Mapping[str, int]
    """resource -> milli-units for all ``count`` pods"""
    topology: TopologyAssignment | None = None
    """Where the pods go, when the flavor has a topology."""


@dataclass(frozen=True, slots=True)
class Admit:
    workload: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    usage: Mapping[FlavorResource, int]
    borrowing: bool = False
    replaces: str | None = None
    """The predecessor slice that this admission finished (its usage was transferred)."""
    admission_checks: tuple[str, ...] = ()
    """Checks that must all be Ready before its pods may start: until then it only reserves quota."""


class PreemptionReason(StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    RECLAIM_WITHIN_COHORT = "InCohortReclamation"
    BORROW_WITHIN_COHORT = "InCohortReclaimWhileBorrowing"
    FAIR_SHARING = "InCohortFairSharing"
    STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    DEACTIVATED = "WorkloadDeactivated"
    ADMISSION_CHECK = "AdmissionCheck"
    """A check asked for a retry: the reservation is given back and the workload requeued."""
    ADMISSION_CHECK_REJECTED = "DeactivatedDueToAdmissionCheck"
    """A check rejected the workload: it is deactivated."""


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict ``victims``. Their quota stays held until the operator calls ``Engine.release``."""

    victims: tuple[str, ...]
    reason: str
    preemptor: str | None = None
    kind: PreemptionReason = PreemptionReason.IN_CLUSTER_QUEUE
    victim_kinds: Mapping[str, PreemptionReason] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pending:
    workload: str
    reason: str
    cluster_queue: str | None = None


Decision = Admit | Preempt | Pending
