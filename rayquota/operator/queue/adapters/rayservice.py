"""A RayService under quota: the gate is ``rayClusterConfig.suspend`` (copied into each child
at creation), and each child RayCluster is ungated only when the admitted slice covers it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rayquota.operator.queue.adapters.protocol import (
    Body,
    Edit,
    allocation_of,
    changed,
    edited,
    inject_cluster,
    no_pods_hold_quota,
    placements,
    restore_cluster,
)
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.podsets import Demand, rayservice_demand
from rayquota.queueing import ResourceFlavor


def _name(obj: Body) -> str:
    return str(obj["metadata"]["name"])


def ordered_children(service: Body, children: Sequence[Body]) -> list[Body]:
    """The active child first (it keeps serving), then the pending one, then any other by age."""
    status = service.get("status") or {}
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")

    def rank(child: Body) -> tuple[int, str, str]:
        name = _name(child)
        first = 0 if name == active else 1 if name == pending else 2
        return (first, str(child["metadata"].get("creationTimestamp", "")), name)

    return sorted(children, key=rank)


class RayServiceAdapter:
    kind = "RayService"

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return rayservice_demand(obj, ordered_children(obj, children))

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return {_name(c) for c in children if not (c.get("spec") or {}).get("suspend")}

    def is_suspended(self, obj: Body) -> bool:
        return bool(((obj.get("spec") or {}).get("rayClusterConfig") or {}).get("suspend"))

    def _gate_template(self, obj: Body) -> list[Edit]:
        """``rayClusterConfig.suspend`` stays set for good: every new child is born gated. (The
        RayService's config hash ignores it, so setting it starts no upgrade.)"""
        after = edited(obj)
        after["spec"].setdefault("rayClusterConfig", {})["suspend"] = True
        return changed(self.kind, obj, after)

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        edits = self._gate_template(obj)
        for child in children:
            if child["metadata"].get("deletionTimestamp"):
                continue  # going away with its pods
            gated = edited(child)
            gated["spec"]["suspend"] = True
            edits += changed("RayCluster", child, gated)
        return edits

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        """Children only: the RayService's own rayClusterConfig keeps its gate, so every new
        child is born suspended, and its templates stay as written (a change there would
        start an upgrade)."""
        demand, allocation = allocation_of(self, obj, children, admission)
        by_pod_set = placements(admission, flavors)
        edits = self._gate_template(obj)
        for child in children:
            part = _name(child)
            share = allocation.get(part)
            if share is None or not share.runs or child["metadata"].get("deletionTimestamp"):
                continue
            after = edited(child)
            inject_cluster(after["spec"], demand.pod_set_of.get(part, {}), by_pod_set)
            after["spec"]["suspend"] = False
            edits += changed("RayCluster", child, after)
        return edits

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        edits: list[Edit] = []
        for child in children:
            after = edited(child)
            restore_cluster(after["spec"])
            edits += changed("RayCluster", child, after)
        return edits

    def finished(self, obj: Body) -> bool:
        return False

    def pods_gone(self, obj: Body, pods: Sequence[Body]) -> bool:
        return no_pods_hold_quota(pods)
