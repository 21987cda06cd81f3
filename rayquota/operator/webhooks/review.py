"""What the webhooks decide, as pure functions of the AdmissionReview request and the
operator's caches."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.queue import converter
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


def mutate(kind: str, obj: Body, objects: QueueObjects) -> Verdict:
    """CREATE of a queued Ray object: born suspended (the gate on the object, or on the
    RayService's cluster template so every child is born gated)."""
    queue = objects.queue_name(kind, obj)
    if queue is None:
        return ALLOW
    if kind == "RayJob" and (refusal := _queued_rayjob_refusal(obj, queue)):
        return Verdict(False, refusal)
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
    """UPDATE that clears a gate: allowed only as far as the recorded admission covers."""
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
