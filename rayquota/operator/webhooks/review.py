"""What the webhooks decide, as pure functions of the AdmissionReview request and the
operator's caches."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.queue import converter, topology_request
from rayquota.operator.queue.gate import QueueGate, recorded_admission
from rayquota.operator.queue.objects import QueueObjects, is_child

Body = Mapping[str, Any]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()
    warning: str | None = None


ALLOW = Verdict(True)


def _suspended(kind: str, obj: Body) -> bool:
    spec = obj.get("spec") or {}
    if kind == "RayService":
        return bool((spec.get("rayClusterConfig") or {}).get("suspend"))
    return bool(spec.get("suspend"))


def topology_errors(kind: str, obj: Body) -> list[str]:
    """Kueue's topology annotations on the object's pod templates that cannot be read."""
    spec = obj.get("spec") or {}
    clusters: list[tuple[str, Mapping[str, Any]]] = []
    if kind == "RayCluster":
        clusters.append(("spec", spec))
    elif kind == "RayJob":
        clusters.append(("spec.rayClusterSpec", spec.get("rayClusterSpec") or {}))
    elif kind == "RayService":
        clusters.append(("spec.rayClusterConfig", spec.get("rayClusterConfig") or {}))
    errors: list[str] = []
    if kind == "RayJob" and spec.get("submitterPodTemplate"):
        errors += topology_request.errors(spec["submitterPodTemplate"], "spec.submitterPodTemplate")
    for path, cluster in clusters:
        head = (cluster.get("headGroupSpec") or {}).get("template") or {}
        errors += topology_request.errors(head, f"{path}.headGroupSpec.template")
        for index, group in enumerate(cluster.get("workerGroupSpecs") or ()):
            template = group.get("template") or {}
            hosts = int(group.get("numOfHosts") or 1)
            errors += topology_request.errors(template, f"{path}.workerGroupSpecs[{index}].template", hosts)
    return errors


def _topology_refusal(kind: str, obj: Body) -> Verdict | None:
    errors = topology_errors(kind, obj)
    if not errors:
        return None
    name = f"{kind} {obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}"
    return Verdict(False, f"{name}: " + "; ".join(errors))


def mutate(kind: str, obj: Body, objects: QueueObjects) -> Verdict:
    """CREATE of a queued Ray object: born suspended (the gate on the object, or on the
    RayService's cluster template so every child is born gated). Topology annotations that
    cannot be read are refused here, with the field and the value."""
    queue = objects.queue_name(kind, obj)
    if queue is None:
        return ALLOW
    if kind == "RayJob" and (refusal := _queued_rayjob_refusal(obj, queue)):
        return Verdict(False, refusal)
    refused = _topology_refusal(kind, obj)
    if refused is not None:
        return refused
    if _suspended(kind, obj):
        return ALLOW
    if kind == "RayService":
        if "rayClusterConfig" not in (obj.get("spec") or {}):
            return ALLOW
        op = {"op": "add", "path": "/spec/rayClusterConfig/suspend", "value": True}
    else:
        op = {"op": "add", "path": "/spec/suspend", "value": True}
    return Verdict(True, patch=(op,), warning="suspended until its queue admits it")


def _queued_rayjob_refusal(obj: Body, queue: str) -> str | None:
    """Kueue's rule for a queued RayJob, said at creation: the queue suspends it, and KubeRay
    lets a suspended RayJob run only if its cluster goes when the job ends (else the cluster
    would keep the queue's quota after the work is done)."""
    spec = obj.get("spec") or {}
    if spec.get("clusterSelector") or spec.get("shutdownAfterJobFinishes"):
        return None
    value = spec.get("shutdownAfterJobFinishes")
    said = "unset" if value is None else json.dumps(value)
    return (
        f"spec.shutdownAfterJobFinishes: {said}: a RayJob in queue {queue} "
        "must set spec.shutdownAfterJobFinishes: true (the queue suspends it until admitted, and its "
        "RayCluster would otherwise hold the queue's quota after the job ends)"
    )


def validate_ray(kind: str, obj: Body, old: Body | None, objects: QueueObjects, gate: QueueGate) -> Verdict:
    """UPDATE that clears a gate: allowed only as far as the recorded admission covers; and no
    queued object gets topology annotations that cannot be read."""
    if old is not None and objects.queue_name(kind, obj) is not None:
        refused = _topology_refusal(kind, obj)
        if refused is not None:
            return refused
    if old is None or not _suspended(kind, old) or _suspended(kind, obj):
        return ALLOW
    name = f"{kind} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
    if kind == "RayCluster" and is_child(obj):
        caps = gate.caps_for(obj)
        if caps is not None and not caps.head:
            return Verdict(
                False,
                f"{name} belongs to a queued object whose admitted quota does not cover it; "
                "spec.suspend is cleared by the queue integration when it is admitted",
            )
        return ALLOW
    queued = objects.queued(kind, dict(obj))
    if queued is None:
        return ALLOW
    if kind == "RayService":
        return Verdict(False, f"{name}: spec.rayClusterConfig.suspend is the queue's gate and stays set")
    if recorded_admission(objects.workload(queued.workload)) is None:
        return Verdict(
            False,
            f"{name} is waiting in queue {objects.queue_name(kind, obj)} and is not admitted; "
            "spec.suspend is cleared by the queue integration when quota is reserved "
            f"(see: rayquota explain {kind.lower()}/{obj['metadata']['name']})",
        )
    return ALLOW


def cluster_queue_errors(obj: Body) -> list[str]:
    """What the CRD schema cannot say: each flavor lists exactly the group's coveredResources,
    no resource is covered by two groups, no flavor appears twice in one group."""
    errors: list[str] = []
    covered_by: dict[str, int] = {}
    for gi, group in enumerate((obj.get("spec") or {}).get("resourceGroups") or []):
        covered = [str(r) for r in group.get("coveredResources") or []]
        for resource in covered:
            if resource in covered_by:
                errors.append(
                    f"spec.resourceGroups[{gi}].coveredResources: {resource} is already covered by "
                    f"spec.resourceGroups[{covered_by[resource]}]"
                )
            covered_by.setdefault(resource, gi)
        seen: set[str] = set()
        for fi, flavor in enumerate(group.get("flavors") or []):
            where = f"spec.resourceGroups[{gi}].flavors[{fi}]"
            if flavor.get("name") in seen:
                errors.append(f"{where}.name: flavor {flavor.get('name')} appears twice in the group")
            seen.add(str(flavor.get("name")))
            names = [str(r.get("name")) for r in flavor.get("resources") or []]
            if sorted(names) != sorted(covered):
                errors.append(
                    f"{where}.resources: lists {sorted(names)}, coveredResources is {sorted(covered)}"
                )
    return errors


def validate_cluster_queue(obj: Body) -> Verdict:
    errors = cluster_queue_errors(obj)
    try:
        converter.cluster_queue(obj)
    except converter.ConversionError as exc:
        errors.append(str(exc))
    if errors:
        return Verdict(False, f"invalid ClusterQueue {obj['metadata'].get('name')}: " + "; ".join(errors))
    return ALLOW
