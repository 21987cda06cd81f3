"""The second lock: the RayCluster planner asks this gate how many pods a cluster may have.

It answers from what the API server holds (the cached Workloads' ``status.admission``),
never from the engine's memory, which runs ahead of the writes: after a crash, no pod may
exist that a recorded admission does not cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import AdmittedCaps
from rayquota.operator.queue import converter
from rayquota.operator.queue.adapters.protocol import allocation_of
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.queue.workload_status import is_evicted

NOTHING = AdmittedCaps(head=False, workers={})


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

    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        queued = self.objects.queued_owner_of_cluster(cluster)
        if queued is None:
            return None
        admission = recorded_admission(self.objects.workload(queued.workload))
        if admission is None:
            return NOTHING
        children = self.objects.children(queued.kind, queued.obj)
        if queued.kind == "RayJob":
            children = [c for c in children if c["metadata"]["name"] == cluster["metadata"]["name"]]
        demand, allocation = allocation_of(queued.adapter, queued.obj, children, admission)
        share = allocation.get(str(cluster["metadata"]["name"]))
        if share is None:
            return NOTHING
        return AdmittedCaps(head=share.head_allowed(demand), workers=share.worker_caps(demand))
