"""A standalone RayCluster under quota: gated by ``spec.suspend``, capped per worker group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
from rayquota.operator.queue.podsets import Demand, raycluster_demand
from rayquota.queueing import ResourceFlavor


class RayClusterAdapter(SpecSuspendGate):
    kind = "RayCluster"

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return raycluster_demand(obj)

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return set() if self.is_suspended(obj) else {str(obj["metadata"]["name"])}

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        demand, allocation = allocation_of(self, obj, children, admission)
        after = edited(obj)
        part = str(obj["metadata"]["name"])
        inject_cluster(after["spec"], demand.pod_set_of.get(part, {}), placements(admission, flavors))
        if allocation[part].runs:
            after["spec"]["suspend"] = False
        return changed(self.kind, obj, after)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        after = edited(obj)
        restore_cluster(after["spec"])
        return changed(self.kind, obj, after)

    def finished(self, obj: Body) -> bool:
        return False
