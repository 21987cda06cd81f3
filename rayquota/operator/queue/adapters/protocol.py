"""The one small interface every Ray kind implements for the queue integration, and the
helpers they share. Adapters are pure: they return edited copies, never write, never call
the engine."""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rayquota.operator.core.pods import pod_finished
from rayquota.operator.queue import placement
from rayquota.operator.queue.coverage import PartAllocation, allocate
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.podsets import Demand, GroupKey, Role
from rayquota.queueing import ResourceFlavor

Body = Mapping[str, Any]


@dataclass(frozen=True)
class Edit:
    """The whole new body of one object (it carries the resourceVersion it was made from)."""

    kind: str
    body: dict[str, Any]


class RayAdapter(Protocol):
    kind: str

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand: ...

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]: ...

    def is_suspended(self, obj: Body) -> bool: ...

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]: ...

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        """Inject each admitted flavor's placement; lift the gate of the parts the slice covers."""
        ...

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]: ...

    def finished(self, obj: Body) -> bool: ...

    def pods_gone(self, obj: Body, pods: Sequence[Body]) -> bool: ...


# --- shared helpers ---------------------------------------------------------------------------


def edited(obj: Body) -> dict[str, Any]:
    return copy.deepcopy(dict(obj))


def changed(kind: str, before: Body, after: dict[str, Any]) -> list[Edit]:
    return [] if after == before else [Edit(kind, after)]


def allocation_of(
    adapter: RayAdapter, obj: Body, children: Sequence[Body], admission: AdmittedSlice | None
) -> tuple[Demand, dict[str, PartAllocation]]:
    demand = adapter.pod_sets(obj, children)
    admitted = admission.counts() if admission is not None else None
    return demand, allocate(demand, admitted, adapter.running_parts(obj, children))


def placements(admission: AdmittedSlice, flavors: Mapping[str, ResourceFlavor]) -> dict[str, dict[str, Any]]:
    """pod set name -> the nodeSelector/tolerations of the flavors it was admitted to."""
    return {
        ps.name: placement.flavor_placement(
            flavors[f] for f in sorted(set(ps.flavors.values())) if f in flavors
        )
        for ps in admission.pod_sets
    }


def cluster_templates(
    cluster_spec: MutableMapping[str, Any],
) -> list[tuple[GroupKey, MutableMapping[str, Any]]]:
    """Every pod template of a RayCluster spec with the group its pods belong to."""
    out: list[tuple[GroupKey, MutableMapping[str, Any]]] = []
    head = cluster_spec.get("headGroupSpec") or {}
    if "template" in head:
        out.append(((Role.HEAD, ""), head["template"]))
    for group in cluster_spec.get("workerGroupSpecs") or []:
        if "template" in group:
            out.append(((Role.WORKER, str(group.get("groupName") or "")), group["template"]))
    return out


def inject_cluster(
    cluster_spec: MutableMapping[str, Any], pod_set_of: Mapping[GroupKey, str], by_pod_set: Mapping[str, Any]
) -> None:
    for key, template in cluster_templates(cluster_spec):
        name = pod_set_of.get(key)
        if name is not None and name in by_pod_set:
            placement.inject(template, by_pod_set[name])


def restore_cluster(cluster_spec: MutableMapping[str, Any]) -> None:
    for _, template in cluster_templates(cluster_spec):
        placement.restore(template)


def spec_suspended(obj: Body) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def set_spec_suspend(kind: str, obj: Body) -> list[Edit]:
    """The gate of a RayJob and of a standalone RayCluster: ``spec.suspend``."""
    after = edited(obj)
    after["spec"]["suspend"] = True
    return changed(kind, obj, after)


def gate_cleared_by_hand(obj: Mapping[str, Any]) -> bool:
    """Was the gate of this unadmitted, ungated object cleared by someone? An object still at
    its first generation is as its author created it: written without ``suspend`` (no webhook set
    it), it is gated quietly. Any later spec change since means someone (after the queue or a
    webhook had set the gate) cleared it."""
    return int(obj["metadata"].get("generation") or 1) > 1


def no_pods_hold_quota(pods: Sequence[Body]) -> bool:
    """Finished pods release their node's resources; any other pod (terminating too) holds them."""
    return all(pod_finished(p) for p in pods)


class SpecSuspendGate:
    """The gate of a kind held by its own top-level ``spec.suspend`` (RayJob, RayCluster): whose
    quota is free once none of its pods hold any."""

    kind: str

    def is_suspended(self, obj: Body) -> bool:
        return spec_suspended(obj)

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        return set_spec_suspend(self.kind, obj)

    def pods_gone(self, obj: Body, pods: Sequence[Body]) -> bool:
        return no_pods_hold_quota(pods)
