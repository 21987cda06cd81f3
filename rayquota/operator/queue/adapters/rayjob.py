"""A RayJob under quota: gated by its own ``spec.suspend``; its cluster and submitter
templates get the admitted flavors before the gate lifts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rayquota.api.ray_v1 import JobDeploymentStatus
from rayquota.operator.core.memo import BoundedMemo
from rayquota.operator.queue import placement
from rayquota.operator.queue.adapters.protocol import (
    Body,
    Edit,
    SpecSuspendGate,
    allocation_of,
    changed,
    edited,
    inject_cluster,
    placements,
    restore_cluster,
)
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.podsets import Demand, Role, rayjob_demand
from rayquota.queueing import ResourceFlavor

# A RayJob in these states runs nothing any more (ValidationFailed never ran): no quota.
FINISHED_STATES = (
    JobDeploymentStatus.COMPLETE,
    JobDeploymentStatus.FAILED,
    JobDeploymentStatus.VALIDATION_FAILED,
)


def cluster_name(rayjob: Body) -> str | None:
    name = (rayjob.get("status") or {}).get("rayClusterName")
    return str(name) if name else None


# Demands remembered per RayJob spec; the oldest are dropped beyond this many.
DEMAND_MEMO_SIZE = 20_000


class RayJobAdapter(SpecSuspendGate):
    kind = "RayJob"

    def __init__(self) -> None:
        # The demand is a pure function of the spec, name and labels, but it is asked for on
        # every event of the RayJob, its cluster and its pods (the Workload reconciler, the
        # gate): parsing the templates' quantities each time dominated the operator under a
        # flood. A spec change bumps the generation, so the memo never answers for an old spec.
        self._demands: BoundedMemo[tuple[object, ...], Demand] = BoundedMemo(DEMAND_MEMO_SIZE)

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        part = str(children[0]["metadata"]["name"]) if children else cluster_name(obj)
        meta = obj["metadata"]
        uid, generation = meta.get("uid"), meta.get("generation")
        if uid is None or generation is None:
            return rayjob_demand(obj, part)
        memo_key = (uid, generation, part, tuple(sorted((meta.get("labels") or {}).items())))
        return self._demands.get(memo_key, lambda: rayjob_demand(obj, part))

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return set() if self.is_suspended(obj) else set(self.pod_sets(obj, children).parts)

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        demand, allocation = allocation_of(self, obj, children, admission)
        after = edited(obj)
        spec = after["spec"]
        by_pod_set = placements(admission, flavors)
        # A cluster created before this admission (by an older operator, or before the gate
        # closed) gets the placement too, before the gate lifts: its planner replaces the pods
        # built without it.
        edits: list[Edit] = []
        for child in children:
            placed = edited(child)
            for part in demand.parts:
                inject_cluster(placed["spec"], demand.pod_set_of[part], by_pod_set)
            edits += changed("RayCluster", child, placed)
        for part in demand.parts:
            if spec.get("rayClusterSpec"):
                inject_cluster(spec["rayClusterSpec"], demand.pod_set_of[part], by_pod_set)
            wanted = by_pod_set.get(demand.pod_set_of[part].get((Role.SUBMITTER, ""), ""))
            if wanted and (wanted["nodeSelector"] or wanted["tolerations"]):
                placement.inject(spec.setdefault("submitterPodTemplate", {}), wanted)
        if all(a.runs for a in allocation.values()):
            spec["suspend"] = False
        return edits + changed(self.kind, obj, after)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        after = edited(obj)
        spec = after["spec"]
        if spec.get("rayClusterSpec"):
            restore_cluster(spec["rayClusterSpec"])
        if "submitterPodTemplate" in spec:
            placement.restore(spec["submitterPodTemplate"])
            if not spec["submitterPodTemplate"].get("spec") and len(spec["submitterPodTemplate"]) <= 1:
                del spec["submitterPodTemplate"]  # we created it only to carry the placement
        return changed(self.kind, obj, after)

    def finished(self, obj: Body) -> bool:
        return (obj.get("status") or {}).get("jobDeploymentStatus") in FINISHED_STATES
