"""A RayService under quota: the gate is ``rayClusterConfig.suspend`` (copied into each child
at creation), and each child RayCluster is ungated only when the admitted slice covers it."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart, gate_free
from rayquota.operator.queue.adapters.protocol import Body, Edit, Grant, SuspendGate, TemplateAt
from rayquota.operator.queue.adapters.ray_kind import (
    RayKind,
    cluster_spec_templates,
    cluster_templates,
    inject_cluster,
    restore_cluster,
)
from rayquota.operator.queue.adapters.record_helpers import (
    allocation_of,
    changed,
    edited,
    no_pods_hold_quota,
    placements,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.pod_set_words import joined_names
from rayquota.operator.queue.demand.podsets import (
    HEAD_POD_SET,
    Demand,
    GroupKey,
    PodSetDemand,
    Role,
    cluster_pod_sets,
    shape_key,
)
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.ray.vocabulary import labels
from rayquota.queueing import ResourceFlavor


def _name(obj: Body) -> str:
    return str(obj["metadata"]["name"])


def ordered_children(service: Body, children: Sequence[Body]) -> list[Body]:
    """The active child first (it keeps serving), then any other unsuspended one but the pending
    one, by age (a cluster being replaced: a pending one that never served, upgraded again, or
    the old active one before its deletion delay ends; each holds what it runs until it is
    gone), then the pending one: it is the one that waits for quota; suspended others last
    (they run nothing). Quota is counted, and a shortage blamed, in this order, so a waiting
    upgrade's reason names the pending cluster, not the one it replaces."""
    status = service.get("status") or {}
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")

    def rank(child: Body) -> tuple[int, str, str]:
        name = _name(child)
        if name == active:
            first = 0
        elif name == pending:
            first = 2
        else:
            first = 3 if (child.get("spec") or {}).get("suspend") else 1
        return (first, str(child["metadata"].get("creationTimestamp", "")), name)

    return sorted(children, key=rank)


def _service_pod_set_name(role: Role, group: str, shape: str) -> str:
    base = HEAD_POD_SET if role is Role.HEAD else naming.dns_label(group, 56)
    return f"{base}-{shape}"


def rayservice_demand(
    service: Mapping[str, Any], children: Sequence[Mapping[str, Any]], claims: ClaimReading | None = None
) -> Demand:
    """Summed over the live child RayClusters (``children`` in covering order: active first),
    or from ``rayClusterConfig`` before any child exists.

    Pods are merged across children only when their shape is identical: each pod set is
    named after its group *and* its shape, so two children that reuse a group name with
    different pod shapes are counted exactly (never "the first template wins").
    """
    if children:
        sources = [
            (str(c["metadata"]["name"]), c.get("spec") or {}, c["metadata"].get("annotations"))
            for c in children
        ]
    else:
        sources = [
            (
                str(service["metadata"]["name"]),
                (service.get("spec") or {}).get("rayClusterConfig") or {},
                service["metadata"].get("annotations"),
            )
        ]
    merged: dict[str, PodSetDemand] = {}
    parts: dict[str, dict[str, int]] = {}
    pod_set_of: dict[str, dict[GroupKey, str]] = {}
    for part, cluster_spec, cluster_annotations in sources:
        part_counts = parts.setdefault(part, {})
        part_names = pod_set_of.setdefault(part, {})
        for key, ps in cluster_pod_sets(cluster_spec, annotations=cluster_annotations, claims=claims):
            shape = shape_key(ps)
            if ps.topology_request is not None:
                # Placed pods belong to one cluster: during an upgrade the new cluster's groups
                # are placed (together, in their own domain) apart from the old cluster's.
                shape = naming.short_hash(f"{shape}/{part}")
                if ps.topology_request.group is not None:
                    grouped = replace(ps.topology_request, group=f"{ps.topology_request.group}/{part}")
                    ps = replace(ps, topology_request=grouped)
            name = _service_pod_set_name(ps.role, key[1], shape)
            part_names[key] = name
            part_counts[name] = part_counts.get(name, 0) + ps.count
            previous = merged.get(name)
            count = ps.count + (previous.count if previous else 0)
            merged[name] = replace(ps, name=name, count=count)
    return Demand(tuple(merged.values()), parts, pod_set_of)


def upgrade_update(local: Body, remote: Body) -> dict[str, Any] | None:
    """MultiKueue, beyond Kueue (which forwards only ``serveConfigV2``): a new
    ``rayClusterConfig`` or ``upgradeStrategy`` follows too, so the worker upgrades the service as
    a single cluster would (its queue admits the new cluster as a scale-up slice). The worker
    keeps its own gate and placement: its queue manages them."""
    local_spec, remote_spec = local.get("spec") or {}, remote.get("spec") or {}
    wanted = copy.deepcopy(dict(remote_spec))
    for field in ("serveConfigV2", "upgradeStrategy"):
        if field in local_spec:
            wanted[field] = copy.deepcopy(local_spec[field])
        else:
            wanted.pop(field, None)
    config = gate_free(local_spec.get("rayClusterConfig") or {})
    if config != gate_free(remote_spec.get("rayClusterConfig") or {}):
        wanted["rayClusterConfig"] = {**config, "suspend": True}
    return None if wanted == dict(remote_spec) else wanted


class RayServiceAdapter(RayKind):
    kind = "RayService"
    resource = resources.RAYSERVICES
    # Set for good (every new child is born gated); the queue lifts each child's own gate.
    gate = SuspendGate(("spec", "rayClusterConfig", "suspend"), cleared_by_queue_only=True)
    # Its demand follows its clusters' upgrade progress: every event counts.
    change_filter = None
    grants: tuple[Grant, ...] = ((resources.RAYSERVICES, "update"), (resources.RAYCLUSTERS, "update"))
    # Its conditions and service statuses come back; a new config or upgrade strategy follows.
    multicluster = MultiClusterPart(spec_update=upgrade_update)

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return rayservice_demand(obj, ordered_children(obj, children), self.claim_reading(obj))

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return {_name(c) for c in children if not (c.get("spec") or {}).get("suspend")}

    def is_suspended(self, obj: Body) -> bool:
        return self.gate.is_set(obj)

    # Capabilities (adapters/capabilities.py).

    child_marker = (labels.ORIGINATED_FROM_CRD, "RayService")

    def part_templates(self, obj: Body, children: Sequence[Body], part: str) -> list[tuple[GroupKey, Body]]:
        """The pods of a part are built from that child cluster's own spec."""
        child = next((c for c in children if c["metadata"]["name"] == part), None)
        return list(cluster_templates(dict(child.get("spec") or {}))) if child is not None else []

    def owners_in_words(self, name: str, parts: Collection[str], live: Collection[str]) -> str | None:
        """Its pods are placed by cluster (an upgrade runs two), once the clusters exist."""
        if not all(p in live for p in parts):
            return None
        return ("cluster " if len(parts) == 1 else "clusters ") + joined_names(sorted(parts))

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        return cluster_spec_templates(
            "spec.rayClusterConfig", (obj.get("spec") or {}).get("rayClusterConfig") or {}
        )

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
