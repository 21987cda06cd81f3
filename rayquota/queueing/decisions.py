"""What a scheduling cycle returns: typed decisions, never side effects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .model import FlavorResource


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """The flavor chosen for each resource of one pod set, and the pod count admitted."""

    name: str
    count: int
    flavors: Mapping[str, str]
    """resource -> flavor"""
    usage: Mapping[str, int]
    """resource -> milli-units for all ``count`` pods"""


@dataclass(frozen=True, slots=True)
class Admit:
    workload: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    usage: Mapping[FlavorResource, int]
    borrowing: bool = False
    replaces: str | None = None
    """The predecessor slice that this admission finished (its usage was transferred)."""


class PreemptionReason(StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    RECLAIM_WITHIN_COHORT = "InCohortReclamation"
    BORROW_WITHIN_COHORT = "InCohortReclaimWhileBorrowing"
    FAIR_SHARING = "InCohortFairSharing"
    STOPPED = "ClusterQueueStopped"
    DEACTIVATED = "WorkloadDeactivated"


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
