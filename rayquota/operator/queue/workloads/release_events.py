"""Watch events that go ahead of routine ones in the Workload queue: those that free quota
(to the front), and new queued objects that have no Workload yet (next, behind decisions).

A pod leaving frees quota too when its Workload holds an admission: the quota of a finished,
deleted or evicted object is given back when its last pod is gone, and the next workload of the
cohort waits for exactly that reconcile (under a flood it sat behind every routine pod event).

Under a flood of new Workloads (Kueue's baseline creates 15,000 in a minute) the Workload
controller's queue holds thousands of routine keys. A Workload that just finished, is being
deleted, or whose admission was cleared (Kueue's runner completing an eviction) holds quota
the whole cohort waits for: its reconcile must not wait behind them. Likewise a new queued
object is on the admission path: its Workload is created before the routine reconciles of
objects already running (under a flood of new RayJobs the queue also holds the events of the
admitted ones' clusters and pods), so admissions keep up with arrivals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.informer import DELETED
from rayquota.operator.queue.admission.workload_status import is_finished

ChangeCallback = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], None]


def frees_quota(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    if old is None:
        return False
    if is_finished(new) and not is_finished(old):
        return True
    if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
        return True
    return bool((old.get("status") or {}).get("admission")) and not (new.get("status") or {}).get("admission")


def enqueue_first_when_freeing(enqueue_first: Callable[[ObjectKey], None]) -> ChangeCallback:
    def handle(event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        if event != DELETED and frees_quota(new, old):
            enqueue_first(ObjectKey.of(new))

    return handle


def enqueue_first_when_pod_leaves(
    workloads_of: Callable[[Mapping[str, Any]], list[ObjectKey]],
    holds_quota: Callable[[ObjectKey], bool],
    enqueue_first: Callable[[ObjectKey], None],
) -> ChangeCallback:
    """A pod gone: the Workloads that count it and hold quota look again first."""

    def handle(event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        if event != DELETED:
            return
        for key in workloads_of(new):
            if holds_quota(key):
                enqueue_first(key)

    return handle


class _QueuedLookup(Protocol):
    def queued(self, kind: str, obj: dict[str, Any]) -> Any: ...

    def workload(self, key: ObjectKey) -> Mapping[str, Any] | None: ...


def enqueue_soon_when_new(
    kind: str, objects: _QueuedLookup, enqueue_soon: Callable[[ObjectKey], None]
) -> ChangeCallback:
    def handle(event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        if old is not None or event == DELETED:
            return
        queued = objects.queued(kind, dict(new))
        if queued is not None and objects.workload(queued.workload) is None:
            enqueue_soon(queued.workload)

    return handle
