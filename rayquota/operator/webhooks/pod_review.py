"""The pod webhook of admission-only mode: a pod of a cluster whose queued owner holds its
children at their pods (a RayService beside KubeRay's operator), or a queued cluster's pod that
asks for a topology, is created behind rayquota's scheduling gate (`queue/pod_gate.py`); the
pod ungater lets it through once admitted (pinned to its domain). An UPDATE that removes the
gate before then (a user's) is refused (:func:`keep_gate`).

It fails closed: a pod whose RayCluster, or whose cluster's parent, the cache does not show yet
is gated too (the ungater lets an unqueued cluster's pods through as soon as it sees them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue import pod_gate, topology_request
from rayquota.operator.queue.adapters.protocol import RAY_CLUSTER_PODS
from rayquota.operator.queue.gate import QueueGate
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


def keep_gate(
    pod: Mapping[str, Any], old: Mapping[str, Any], namespace: str, objects: QueueObjects, gate: QueueGate
) -> Verdict:
    """UPDATE of a pod that removes rayquota's scheduling gate: allowed only for a pod the
    recorded admission covers now (the pod ungater's own patch passes: it decides the same way,
    from the same cache). A user clearing it before is refused, since Kubernetes lets no one
    add a scheduling gate back, so it could not be re-asserted."""
    if not pod_gate.gated(old) or pod_gate.gated(pod):
        return ALLOW
    name = _cluster_name(old)
    if name is None:
        return ALLOW
    where = f"pod {namespace}/{old['metadata'].get('name')}"
    cluster = objects.informers["RayCluster"].store.get(namespace, name)
    if cluster is None:
        return Verdict(
            False, f"{where}: {pod_gate.SCHEDULING_GATE} stays until its RayCluster {name} is seen"
        )
    caps = gate.caps_for(cluster)
    if caps is None:
        return ALLOW
    uid = old["metadata"].get("uid")
    pods = [p for p in objects.pods(RAY_CLUSTER_PODS, namespace, name) if p["metadata"].get("uid") != uid]
    holding = pod_gate.releases(caps, [*pods, old])
    if any(r.pod["metadata"].get("uid") == uid for r in holding.releases):
        return ALLOW
    why = "; ".join(holding.waiting) or "its queue has not admitted it"
    return Verdict(
        False,
        f"{where}: the scheduling gate {pod_gate.SCHEDULING_GATE} is lifted by the queue integration "
        f"once the admitted quota covers the pod ({why})",
    )
