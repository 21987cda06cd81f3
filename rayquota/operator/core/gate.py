"""The admission gate: how many pods a RayCluster may have while it is under quota control,
and the queue's verdict on a Ray object, for its status.

The queue integration installs its own gate; without one nothing is capped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class AdmittedCaps:
    head: bool  # may the head pod exist
    workers: Mapping[str, int] = field(default_factory=dict)  # worker group -> most pods
    # Topology-aware admission: where each group's pods go, (nodeSelector, pods) per domain in
    # the assignment's order; None / absent: no assignment, pods go wherever the flavor allows.
    head_domains: tuple[tuple[Mapping[str, str], int], ...] | None = None
    worker_domains: Mapping[str, tuple[tuple[Mapping[str, str], int], ...]] = field(default_factory=dict)

    def worker_cap(self, group: str) -> int:
        return int(self.workers.get(group, 0)) if self.head else 0


QUOTA_RESERVED = "QuotaReserved"
"""The condition type the Ray objects carry while they are queued."""


@dataclass(frozen=True)
class QueueCondition:
    """The queue's verdict on one queued Ray object, as its ``QuotaReserved`` condition says it.

    It is computed by the Ray reconcilers' own status functions (never written beside them),
    so their exact status writes keep it instead of erasing it."""

    admitted: bool
    reason: str  # Admitted | Pending
    message: str
    slice_waiting: bool = False  # admitted, and a scale-up slice waits for quota
    # False until the engine has given its first verdict (the Workload may not even exist yet).
    evaluated: bool = True


class AdmissionGate(Protocol):
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        """None when the cluster is not under quota control."""
        ...

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        """None when the object is not queued (a child cluster is accounted through its parent)."""
        ...


class NoGate:
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        return None

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        return None
