"""The moment a pending workload queues by (Kueue's queue order timestamp).

A ClusterQueue's line is ordered by priority, then by this moment, earliest first. It is the
workload's creation time, except for a workload whose last eviction (its ``Evicted`` condition,
still true while it waits to be admitted again) was

- for pods not ready in time (``PodsReadyTimeout``), when waitForPodsReady's
  ``requeuingStrategy.timestamp`` is ``Eviction`` (Kueue's default): the eviction time, so the
  requeued workload goes behind those that waited meanwhile;
- by an admission check (``AdmissionCheck``), whatever that setting: the eviction time.

Evictions for other reasons (preemption, a stopped queue...) leave the creation time: a
preempted workload keeps its place. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
"""Kueue's ``Evicted`` reason for pods that were not all ready in time."""
EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
"""Kueue's ``Evicted`` reason for an admission check that asked for a retry."""


class RequeuingTimestamp(StrEnum):
    """waitForPodsReady's ``requeuingStrategy.timestamp``: how a workload evicted for pods not
    ready in time is ordered when it queues again."""

    EVICTION = "Eviction"
    """By the time it was evicted: behind those that waited meanwhile (Kueue's default)."""
    CREATION = "Creation"
    """By its creation time: it keeps its place."""


@dataclass(frozen=True, slots=True)
class WorkloadEviction:
    """A workload's last eviction, as its ``Evicted`` condition says while it is true."""

    reason: str
    """The condition's reason (Kueue's: ``PodsReadyTimeout``, ``AdmissionCheck``, ``Preempted``...)."""
    at: float
    """The condition's ``lastTransitionTime`` (seconds, the caller's clock as ``created``)."""


def queue_order_time(
    created: float, evicted: WorkloadEviction | None, requeuing_timestamp: RequeuingTimestamp
) -> float:
    """The moment a workload created at ``created``, last evicted as ``evicted`` (``None``: not
    evicted), queues by under ``requeuing_timestamp`` (see the module)."""
    if evicted is None:
        return created
    if evicted.reason == EVICTED_BY_ADMISSION_CHECK:
        return evicted.at
    if evicted.reason == EVICTED_BY_PODS_READY_TIMEOUT and requeuing_timestamp is RequeuingTimestamp.EVICTION:
        return evicted.at
    return created
