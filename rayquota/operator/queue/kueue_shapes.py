"""The few places where Kueue's kueue.x-k8s.io/v1beta2 bodies differ from rayquota.io/v1alpha1,
translated in both directions. Pure functions on camelCase dicts.

Inbound (any body -> the field names the converter reads), applied in both modes since the
names never collide:
- ClusterQueue ``spec.cohortName`` -> ``cohort``; Cohort ``spec.parentName`` -> ``parent``;
- Workload ``spec.priorityClassRef`` (a WorkloadPriorityClass) -> ``priorityClassName``;
- ClusterQueue ``flavorFungibility`` ``MayStopSearch`` -> ``Borrow`` / ``Preempt``.

Outbound (what the integration writes, rayquota shape -> Kueue's), in Kueue-API mode only:
- Workload ``spec.podSets[].requests`` become one container's requests in ``template`` (Kueue's
  PodSet has only a template), ``priorityClassName`` becomes ``priorityClassRef``;
- Workload status: no ``pendingReason`` (its words are in the QuotaReserved condition), and
  the condition reasons Kueue's tools know (``Evicted``/``Preempted``, ``NoReservation``);
- LocalQueue status: ``flavorUsage`` is ``flavorsUsage`` in v1beta2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"
PRIORITY_CLASS_KIND = "WorkloadPriorityClass"
# Kueue's field manager for Workload admission status (its scheduler and its perf runner
# apply under it; the runner clears an evicted Workload's admission by omitting it).
ADMISSION_FIELD_MANAGER = "kueue-admission"
# Kueue's finalizer on ClusterQueues and ResourceFlavors that are still in use.
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
# Name of the one container that carries a pod set's per-pod requests in a Kueue template.
REQUESTS_CONTAINER = "main"

_RENAMED_SPEC_FIELDS = {"cohortName": "cohort", "parentName": "parent"}


# --- inbound --------------------------------------------------------------------------------


def rayquota_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ClusterQueue, Cohort or Workload spec with Kueue v1beta2's names as the converter reads them."""
    kueue_keys = [*_RENAMED_SPEC_FIELDS, "priorityClassRef", "flavorFungibility"]
    if not any(k in spec for k in kueue_keys):
        return spec
    out = {k: v for k, v in spec.items() if k not in kueue_keys}
    for kueue_name, name in _RENAMED_SPEC_FIELDS.items():
        if spec.get(kueue_name):
            out.setdefault(name, spec[kueue_name])
    ref = spec.get("priorityClassRef") or {}
    if ref.get("name") and ref.get("kind", PRIORITY_CLASS_KIND) == PRIORITY_CLASS_KIND:
        out.setdefault("priorityClassName", ref["name"])
    if "flavorFungibility" in spec:
        fungibility = dict(spec["flavorFungibility"] or {})
        # v1beta2 says MayStopSearch where v1beta1 said Borrow / Preempt; preference has no equivalent.
        for key, stop in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
            if fungibility.get(key) == "MayStopSearch":
                fungibility[key] = stop
        fungibility.pop("preference", None)
        out["flavorFungibility"] = fungibility
    return out


# --- outbound -------------------------------------------------------------------------------


def _kueue_pod_set(pod_set: Mapping[str, Any]) -> dict[str, Any]:
    template = {k: v for k, v in (pod_set.get("template") or {}).items()}
    template_spec = dict(template.get("spec") or {})
    requests = pod_set.get("requests")
    if requests is not None:
        template_spec["containers"] = [
            {"name": REQUESTS_CONTAINER, "resources": {"requests": dict(requests)}}
        ]
    template_spec.setdefault("containers", [])
    template["spec"] = {k: v for k, v in template_spec.items() if v or k == "containers"}
    return {"name": pod_set["name"], "count": pod_set.get("count", 1), "template": template}


def workload_spec_to_kueue(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in ("podSets", "priorityClassName")}
    out["podSets"] = [_kueue_pod_set(ps) for ps in spec.get("podSets") or ()]
    if spec.get("priorityClassName"):
        out["priorityClassRef"] = {
            "group": KUEUE_GROUP,
            "kind": PRIORITY_CLASS_KIND,
            "name": spec["priorityClassName"],
        }
    return out


def _kueue_condition(condition: Mapping[str, Any], preempted: bool) -> dict[str, Any]:
    out = dict(condition)
    if condition.get("status") == "True" and condition.get("type") == "Evicted" and preempted:
        out["reason"] = "Preempted"  # Kueue's Evicted reason; the detail is on Preempted
    elif condition.get("status") == "False" and condition.get("type") == "Admitted":
        out["reason"] = "NoReservation"
    return out


def workload_status_to_kueue(status: dict[str, Any]) -> dict[str, Any]:
    conditions = status.get("conditions") or []
    preempted = any(c.get("type") == "Preempted" and c.get("status") == "True" for c in conditions)
    out = {k: v for k, v in status.items() if k != "pendingReason"}
    if conditions:
        out["conditions"] = [_kueue_condition(c, preempted) for c in conditions]
    return out


def local_queue_status_to_kueue(status: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in status.items() if k != "flavorUsage"}
    if "flavorUsage" in status:
        out["flavorsUsage"] = status["flavorUsage"]
    return out
