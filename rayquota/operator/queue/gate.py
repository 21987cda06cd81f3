"""The second lock: the RayCluster planner asks this gate how many pods a cluster may have.

It answers from what the API server holds (the cached Workloads' ``status.admission``),
never from the engine's memory, which runs ahead of the writes: after a crash, no pod may
exist that a recorded admission does not cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.api.queueing_v1alpha1 import WorkloadConditionType as Cond
from rayquota.operator.core import AdmittedCaps, QueueCondition
from rayquota.operator.queue import converter
from rayquota.operator.queue.adapters.protocol import allocation_of
from rayquota.operator.queue.admission_memo import AdmissionMemo
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.queue.topology_caps import cluster_domains
from rayquota.operator.queue.workload_status import NOT_YET_EVALUATED, SCALE_UP_WAITING, is_evicted
from rayquota.operator.ray import conditions

NOTHING = AdmittedCaps(head=False, workers={})
ADMITTED = "Admitted"
PENDING = "Pending"


def recorded_admission(workload: Mapping[str, Any] | None) -> AdmittedSlice | None:
    """The admission a Workload's status records, unless it is being evicted."""
    if workload is None:
        return None
    status = workload.get("status") or {}
    if not status.get("admission") or is_evicted(workload):
        return None
    cluster_queue, pod_sets = converter.admission_from_api(status["admission"])
    return AdmittedSlice(cluster_queue, pod_sets, {})


class QueueGate:
    def __init__(self, objects: QueueObjects) -> None:
        self.objects = objects
        # Asked on every event of every queued cluster: parse each Workload version once.
        self.admissions = AdmissionMemo()

    def _recorded_admission(self, workload: Mapping[str, Any] | None) -> AdmittedSlice | None:
        """:func:`recorded_admission`, through the memo."""
        if workload is None or is_evicted(workload):
            return None
        parsed = self.admissions.parsed(workload)
        return AdmittedSlice(parsed[0], parsed[1], {}) if parsed is not None else None

    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        queued = self.objects.queued_owner_of_cluster(cluster)
        if queued is None:
            return None
        admission = self._recorded_admission(self.objects.workload(queued.workload))
        if admission is None:
            return NOTHING
        children = self.objects.children(queued.kind, queued.obj)
        if queued.kind == "RayJob":
            children = [c for c in children if c["metadata"]["name"] == cluster["metadata"]["name"]]
        demand, allocation = allocation_of(queued.adapter, queued.obj, children, admission)
        part = str(cluster["metadata"]["name"])
        share = allocation.get(part)
        if share is None:
            return NOTHING
        head_domains, worker_domains = cluster_domains(demand, part, admission)
        return AdmittedCaps(
            head=share.head_allowed(demand),
            workers=share.worker_caps(demand),
            head_domains=head_domains,
            worker_domains=worker_domains,
        )

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        """The recorded Workload's verdict, in the engine's words: its pending reason while it
        waits (or while an admitted object's scale-up slice waits), else its admission."""
        queued = self.objects.queued(kind, dict(obj))
        if queued is None:
            return None
        workload = self.objects.workload(queued.workload)
        if workload is None:
            # The same words as before the first verdict: the Workload's creation alone does not
            # cost the Ray object a status write.
            return QueueCondition(admitted=False, reason=PENDING, message=NOT_YET_EVALUATED, evaluated=False)
        status = workload.get("status") or {}
        waiting = str(status.get("pendingReason") or "")
        if self._recorded_admission(workload) is None:
            reserved = conditions.find(status.get("conditions"), Cond.QUOTA_RESERVED) or {}
            message = waiting or str(reserved.get("message") or "")
            return QueueCondition(
                admitted=False, reason=PENDING, message=message or NOT_YET_EVALUATED, evaluated=bool(message)
            )
        admitted = conditions.find(status.get("conditions"), Cond.ADMITTED) or {}
        message = waiting or str(admitted.get("message") or "admitted")
        return QueueCondition(
            admitted=True,
            reason=ADMITTED,
            message=message,
            slice_waiting=waiting.startswith(SCALE_UP_WAITING),
        )
