"""The pod webhook of admission-only mode: a pod of a cluster whose queued owner holds its
children at their pods (a RayService beside KubeRay's operator), or a queued cluster's pod that
asks for a topology, is created behind rayquota's scheduling gate (`queue/pod_gate.py`); the
pod ungater lets it through once admitted (pinned to its domain).

It fails closed: a pod whose RayCluster, or whose cluster's parent, the cache does not show yet
is gated too (the ungater lets an unqueued cluster's pods through as soon as it sees them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue import pod_gate, topology_request
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.ray import labels
from rayquota.operator.webhooks.review import ALLOW, Verdict

HELD = "held at its scheduling gate until its queue's admission covers it"


def _cluster_name(pod: Mapping[str, Any]) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "RayCluster":
            return str(ref["name"])
    name = (pod["metadata"].get("labels") or {}).get(labels.RAY_CLUSTER)
    return str(name) if name else None


def hold_pod(pod: Mapping[str, Any], namespace: str, objects: QueueObjects) -> Verdict:
    """CREATE of a pod: gate it when its cluster's pods are held (or may be)."""
    name = _cluster_name(pod)
    if name is None:
        return ALLOW
    cluster = objects.informers["RayCluster"].store.get(namespace, name)
    if cluster is not None and not objects.parent_unknown(cluster):
        owner = objects.queued_owner_of_cluster(cluster)
        if owner is None:
            return ALLOW
        # A pod asking for a topology (Kueue's annotations, copied from its template) is held
        # until pinned to its assigned domain, whichever kind it belongs to.
        placed = topology_request.has_topology_annotations(pod)
        if not owner.adapter.children_held_at_pods and not placed:
            return ALLOW
    patch = pod_gate.gate_patch(pod)
    return Verdict(True, patch=tuple(patch)) if patch else ALLOW
