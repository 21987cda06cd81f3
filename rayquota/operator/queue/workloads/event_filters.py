"""Which watch events of queued objects and pods can change what the Workload reconciler decides
(the shared views; each kind's own filter is in its record, `adapters/<kind>.py`).

The reconciler is level-triggered, so skipping an event is safe exactly when nothing it reads
changed. Under a flood of RayJobs most events are the Ray reconcilers' own status writes
(RayJob states, RayCluster pod counts) and pods moving from Pending to Running: none of them
changes a Workload's demand, whether its object finished, or which pods hold quota, yet each
cost a full reconcile (about 20 per RayJob before this filter).

What the reconciler reads of a Ray object: its spec (the generation counts its changes),
labels and annotations (queue name, priority class), deletion and owners, and of a RayJob's
status only its deployment state (finished?) and its cluster's name. RayService children are
never filtered: a RayService's demand follows its clusters' upgrade progress. Of a pod: that it
exists, its labels (which cluster and group it counts in) and whether it still holds quota.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.core.pods import FINISHED_POD_PHASES, pod_ready

Body = Mapping[str, Any]


def object_view(obj: Body) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    return (
        meta.get("generation"),
        meta.get("labels"),
        meta.get("annotations"),
        meta.get("deletionTimestamp"),
        meta.get("ownerReferences"),
    )


def _pod_view(pod: Body) -> tuple[Any, ...]:
    phase = (pod.get("status") or {}).get("phase")
    # Readiness: waitForPodsReady's PodsReady condition follows it; a pod the scheduler cannot
    # place (in its topology domain) is told on its object.
    unschedulable = any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )
    return (pod["metadata"].get("labels"), phase in FINISHED_POD_PHASES, pod_ready(pod), unschedulable)


def pod_changed(event: str, new: Body, old: Body | None) -> bool:
    if event != MODIFIED or old is None:
        return True
    return _pod_view(new) != _pod_view(old)
