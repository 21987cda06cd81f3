"""The workload reconciler's steps for a queued object that is being evicted and for one that
waits (``WorkloadReconciler._queued`` decides which applies). Each acts through the reconciler:
its driver, its status writes and its edits of the object."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rayquota.operator.core import Manager, ObjectKey, Result
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.adapters import Edit
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.driver import Driver
from rayquota.operator.queue.admission.pods_ready import PODS_READY_TIMEOUT
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.queue.workloads.check_outcomes import CHECK_EVICTIONS, CheckOutcomes
from rayquota.operator.queue.workloads.gate_events import gate_shut_event
from rayquota.operator.queue.workloads.queued_view import QueuedView
from rayquota.operator.queue.workloads.readiness import ReadinessKeeper, requeue_at
from rayquota.operator.queue.workloads.restores import OwedRestores
from rayquota.queueing import names_a_missing_queue


class StepsHost(Protocol):
    """What the steps act through: the workload reconciler (``WorkloadReconciler``), seen from
    here by what it offers, so this module does not import it."""

    manager: Manager
    objects: QueueObjects
    loop: AdmissionLoop
    driver: Driver
    readiness: ReadinessKeeper
    checks: CheckOutcomes
    restores: OwedRestores

    async def apply(self, edits: Sequence[Edit]) -> None: ...

    def all_pods_gone(self, key: ObjectKey, view: QueuedView) -> bool: ...

    def eviction_shown(self, workload: Obj) -> bool: ...

    async def write_status(
        self, workload: Obj, *, released: bool = False, requeue_state: Mapping[str, Any] | None = None
    ) -> Obj | None: ...

    def in_words(self, reason: str, workload: Obj) -> str: ...

    def deferred_words(self, engine_key: str) -> Result | None: ...


async def while_evicting(reconciler: StepsHost, key: ObjectKey, view: QueuedView, workload: Obj) -> None:
    """The gate closes; once the pods are gone (and the cache shows the eviction) the quota
    is released and the templates restored."""
    engine_key, obj, adapter = str(key), view.queued.obj, view.queued.adapter
    eviction = reconciler.driver.eviction(engine_key)
    retry = None
    if eviction is not None and eviction.kind in CHECK_EVICTIONS:  # told by their own events
        if await reconciler.checks.deactivate(obj, workload, eviction):
            return  # the Workload's watch brings us back
        retry = reconciler.checks.retry_state(obj, workload, eviction)
    elif eviction is not None and eviction.kind != PODS_READY_TIMEOUT:  # that one has its own event
        by = f" by {eviction.preemptor}" if eviction.preemptor else ""
        reconciler.manager.recorder.post(obj, "Warning", "Preempted", f"evicted{by}: {eviction.reason}")
    await reconciler.apply(adapter.suspend(obj, view.children))
    if not reconciler.all_pods_gone(key, view) or not reconciler.eviction_shown(workload):
        # Released only once the cache shows the eviction: from then on the gate lets no
        # new pod start (the RayCluster planner reads the cached Workload), so none can
        # appear after the quota went. The Workload's and the pods' events bring us back.
        await reconciler.write_status(workload, requeue_state=retry)
        return
    # The admission is cleared in the API before the engine may give the quota to anyone
    # else: a preemptor's recorded admission never shows beside its victim's.
    reconciler.restores.owe(key)
    await reconciler.write_status(workload, released=True, requeue_state=retry)
    reconciler.driver.pods_gone(engine_key)
    reconciler.loop.request_cycle()
    await reconciler.restores.pay(key, adapter, obj, view.children)


async def while_pending(
    reconciler: StepsHost, key: ObjectKey, view: QueuedView, workload: Obj
) -> Result | None:
    """Not admitted: the gate stays shut (re-asserted with a Warning if it was opened) and the
    Workload says why it waits."""
    engine_key, queued = str(key), view.queued
    obj, adapter = queued.obj, queued.adapter
    reconciler.readiness.forget(engine_key)
    await reconciler.write_status(workload)
    if not adapter.is_suspended(obj) or adapter.running_parts(obj, view.children):
        queue = reconciler.objects.queue_name(queued.kind, obj)
        reconciler.manager.recorder.post(obj, *gate_shut_event(obj, queue))
        await reconciler.apply(adapter.suspend(obj, view.children))
    elif key in reconciler.restores:
        await reconciler.restores.pay(key, adapter, obj, view.children)
    reason = reconciler.driver.pending_reason(engine_key)
    if reason:
        # A LocalQueue that does not exist (a typo in the label) is a mistake to correct.
        kind = "Warning" if names_a_missing_queue(reason) else "Normal"
        reconciler.manager.recorder.post(obj, kind, "Pending", reconciler.in_words(reason, workload))
    backoff = requeue_at(workload)
    if backoff is not None and backoff > time.time():
        # The Requeued condition turns True when the backoff ends.
        return Result(requeue_after_s=backoff - time.time() + 0.5)
    return reconciler.deferred_words(engine_key)
