"""A standalone RayCluster under quota: gated by ``spec.suspend``, capped per worker group."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart
from rayquota.operator.queue.adapters.protocol import Body, Edit, Grant, TemplateAt
from rayquota.operator.queue.adapters.ray_kind import (
    RayKind,
    cluster_spec_templates,
    cluster_templates,
    inject_cluster,
    restore_cluster,
)
from rayquota.operator.queue.adapters.record_helpers import (
    SpecSuspendKind,
    allocation_of,
    changed,
    edited,
    placements,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, GroupKey, cluster_pod_sets, single_part
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.workloads import event_filters
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.vocabulary import labels
from rayquota.queueing import ResourceFlavor


def raycluster_demand(cluster: Mapping[str, Any], claims: ClaimReading | None = None) -> Demand:
    name = str(cluster["metadata"]["name"])
    annotations = cluster["metadata"].get("annotations")
    spec = cluster.get("spec") or {}
    return single_part(name, cluster_pod_sets(spec, annotations=annotations, claims=claims))


def worker_sizes_update(local: Body, remote: Body) -> dict[str, Any] | None:
    """MultiKueue: a manager-side change of a worker group's size follows to the worker (Kueue's
    elastic replica sync), where its queue admits the scale-up slice. An autoscaling cluster's
    sizes are its autoscaler's, in the worker: never overwritten."""
    local_spec, remote_spec = local.get("spec") or {}, remote.get("spec") or {}
    if remote_spec.get("enableInTreeAutoscaling"):
        return None
    sizes = {
        str(g.get("groupName")): (g.get("replicas"), g.get("numOfHosts"))
        for g in local_spec.get("workerGroupSpecs") or ()
    }
    wanted = copy.deepcopy(dict(remote_spec))
    for group in wanted.get("workerGroupSpecs") or ():
        size = sizes.get(str(group.get("groupName")))
        for field, value in zip(("replicas", "numOfHosts"), size or (), strict=False):
            if value is None:
                group.pop(field, None)
            else:
                group[field] = value
    return None if wanted == dict(remote_spec) else wanted


def raycluster_changed(event: str, new: Body, old: Body | None) -> bool:
    if event != MODIFIED or old is None:
        return True
    if (new["metadata"].get("labels") or {}).get(labels.ORIGINATED_FROM_CRD) == "RayService":
        return True
    return event_filters.object_view(new) != event_filters.object_view(old)


class RayClusterAdapter(RayKind, SpecSuspendKind):
    kind = "RayCluster"
    resource = resources.RAYCLUSTERS
    # A RayJob's or RayService's cluster runs on its parent's quota.
    accounted_through = ("RayJob", "RayService")
    child_kind = None
    change_filter = staticmethod(raycluster_changed)
    grants: tuple[Grant, ...] = ((resources.RAYCLUSTERS, "update"),)
    # Its state and endpoints come back from the worker; sizes set in the manager follow.
    multicluster = MultiClusterPart(spec_update=worker_sizes_update)

    def cluster_names(self, obj: Body, children: Sequence[Body]) -> list[str]:
        return [str(obj["metadata"]["name"])]

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        return cluster_spec_templates("spec", obj.get("spec") or {})

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return raycluster_demand(obj, self.claim_reading(obj))

    # Capabilities (adapters/capabilities.py).

    def own_cluster(self, obj: Body) -> str:
        return str(obj["metadata"]["name"])

    def may_start(self, caps: AdmittedCaps) -> bool:
        return caps.head  # a cluster starts with its head

    def part_templates(self, obj: Body, children: Sequence[Body], part: str) -> list[tuple[GroupKey, Body]]:
        return list(cluster_templates(dict(obj.get("spec") or {})))

    def owners_in_words(self, name: str, parts: Collection[str], live: Collection[str]) -> str | None:
        return f"cluster `{name}`"

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
