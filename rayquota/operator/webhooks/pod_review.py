"""The pod webhook of admission-only mode: a pod of a cluster whose queued owner holds its
children at their pods (a RayService beside KubeRay's operator), or a queued cluster's pod that
asks for a topology, is created behind rayquota's scheduling gate (`queue/gating/pod_gate.py`); the
pod ungater lets it through once admitted (pinned to its domain). An UPDATE that removes the
gate before then (a user's) is refused (:func:`keep_gate`).

It fails closed: a pod whose RayCluster, or whose cluster's parent, the cache does not show yet
is gated too (the ungater lets an unqueued cluster's pods through as soon as it sees them).

A pod of a batch/v1 Job is gated when its Job is a queued object's child (a RayJob's submitter,
whose template KubeRay's operator writes) or the cache does not show the Job yet; the Job pod
ungater lets it through once admitted, with its flavor's placement and pinned to its domain. A
queued Job's own pods need no webhook: the admission puts the gate in its template."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue.adapters import CLUSTER_KIND
from rayquota.operator.queue.adapters.job import JOB_PODS
from rayquota.operator.queue.adapters.ray_kind import RAY_CLUSTER_PODS
from rayquota.operator.queue.demand import topology_request
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.gate import QueueGate, recorded_admission
from rayquota.operator.queue.gating.job_pod_ungater import JOB_KIND, job_pods_of_its_own
from rayquota.operator.queue.objects import Queued, QueueObjects, controller_owner
from rayquota.operator.webhooks.review import ALLOW, Verdict

HELD = "held at its scheduling gate until its queue's admission covers it"


def _cluster_name(pod: Mapping[str, Any]) -> str | None:
    """Its controller RayCluster, else the cluster its ``ray.io/cluster`` label names."""
    name = RAY_CLUSTER_PODS.owner_by_reference(pod)
    return name if name is not None else RAY_CLUSTER_PODS.owner_by_label(pod)


def _job_name(pod: Mapping[str, Any]) -> str | None:
    return JOB_PODS.owner_by_reference(pod)


def _gated(pod: Mapping[str, Any]) -> Verdict:
    patch = pod_gate.gate_patch(pod)
    return Verdict(True, patch=tuple(patch)) if patch else ALLOW


def hold_job_pod(pod: Mapping[str, Any], namespace: str, job_name: str, objects: QueueObjects) -> Verdict:
    """CREATE of a Job's pod: gate it when the Job runs on its owner's quota (or may)."""
    job = objects.informers[JOB_KIND].store.get(namespace, job_name)
    if job is None:
        return _gated(pod)  # fail closed; the ungater lets it through once it sees the Job
    if _owner_unknown(job, objects):
        return _gated(pod)  # it may run on a queued RayJob's quota: held until the cache shows it
    owner = objects.queued_owner(JOB_KIND, job)
    if owner is None or job_pods_of_its_own(owner):
        return ALLOW  # under no quota, or queued itself: its admission gates its template
    return _gated(pod)


def _owner_unknown(job: Mapping[str, Any], objects: QueueObjects) -> bool:
    """Is the Job accounted through an owner (a RayJob) the cache does not show?"""
    owner = controller_owner(job)
    if owner is None or owner.get("kind") not in objects.adapters[JOB_KIND].accounted_through:
        return False
    if str(owner["kind"]) not in objects.informers:
        return False  # an owner whose kind the configuration leaves off: the Job is under no quota
    parent = objects.cached(str(owner["kind"]), str(job["metadata"]["namespace"]), str(owner["name"]))
    return parent is None or parent["metadata"].get("uid") != owner.get("uid")


def hold_pod(pod: Mapping[str, Any], namespace: str, objects: QueueObjects) -> Verdict:
    """CREATE of a pod: gate it when its cluster's pods are held (or may be)."""
    name = _cluster_name(pod)
    if name is None:
        job_name = _job_name(pod)
        return ALLOW if job_name is None else hold_job_pod(pod, namespace, job_name, objects)
    cluster = objects.informers[CLUSTER_KIND].store.get(namespace, name)
    if cluster is not None and not objects.parent_unknown(cluster):
        owner = objects.queued_owner_of_cluster(cluster)
        if owner is None:
            return ALLOW
        # A pod asking for a topology (Kueue's annotations, copied from its template), or of an
        # object admitted with topology domains (a topology flavor implies them), is held until
        # pinned to its assigned domain, whichever kind it belongs to.
        placed = topology_request.has_topology_annotations(pod) or _assigned_domains(owner, objects)
        if not owner.adapter.children_held_at_pods and not placed:
            return ALLOW
    return _gated(pod)


def _assigned_domains(owner: Queued, objects: QueueObjects) -> bool:
    """Does the owner's recorded admission place any of its pod sets in topology domains?"""
    admission = recorded_admission(objects.workload(owner.workload))
    return admission is not None and any(ps.topology is not None for ps in admission.pod_sets)


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
    cluster = objects.informers[CLUSTER_KIND].store.get(namespace, name)
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
