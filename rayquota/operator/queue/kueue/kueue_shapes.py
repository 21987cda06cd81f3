"""The few places where Kueue's kueue.x-k8s.io/v1beta2 bodies differ from rayquota.io/v1alpha1,
translated in both directions. Pure functions on camelCase dicts.

Inbound (any body -> the field names the converter reads), applied in both modes since the
names never collide:
- ClusterQueue ``spec.cohortName`` -> ``cohort``; Cohort ``spec.parentName`` -> ``parent``;
- Workload ``spec.priorityClassRef`` -> ``priorityClassName`` (with ``priorityClassSource``
  ``scheduling.k8s.io/priorityclass`` when it names a pod PriorityClass);
- ClusterQueue ``flavorFungibility`` ``MayStopSearch`` -> ``Borrow`` / ``Preempt``.

Outbound (what the integration writes, rayquota shape -> Kueue's), in Kueue-API mode only:
- Workload ``spec.podSets[].requests`` become one container's requests in ``template`` (Kueue's
  PodSet has only a template), ``priorityClassName`` (and its source) becomes ``priorityClassRef``;
- Workload status: no ``pendingReason`` (its words are in the QuotaReserved condition), and
  the condition reasons Kueue's tools know (``Evicted``/``Preempted``, ``NoReservation``);
- LocalQueue status: ``flavorUsage`` is ``flavorsUsage`` in v1beta2;
- a pod set's ``topologyAssignment``: v1beta1's ``domains[{values, count}]`` become v1beta2's
  ``slices`` (one slice, a value per level and domain, a common prefix taken out); the
  inverse reads every v1beta2 variation (universal or individual values, prefix and suffix,
  universal or individual pod counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue.admission.check_states import UNSATISFIED_CHECKS
from rayquota.operator.queue.demand.priorities import POD_PRIORITY_CLASS_SOURCE
from rayquota.queueing import TopologyAssignment, TopologyDomain

KUEUE_GROUP = "kueue.x-k8s.io"
PRIORITY_CLASS_KIND = "WorkloadPriorityClass"
# A pod PriorityClass (Kueue's fallback when no WorkloadPriorityClass is named).
POD_PRIORITY_CLASS_GROUP, POD_PRIORITY_CLASS_KIND = "scheduling.k8s.io", "PriorityClass"
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
    elif ref.get("name") and ref.get("kind") == POD_PRIORITY_CLASS_KIND:
        out.setdefault("priorityClassName", ref["name"])
        out.setdefault("priorityClassSource", POD_PRIORITY_CLASS_SOURCE)
    if "flavorFungibility" in spec:
        fungibility = dict(spec["flavorFungibility"] or {})
        # v1beta2 says MayStopSearch where v1beta1 said Borrow / Preempt (preference is read as is).
        for key, stop in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
            if fungibility.get(key) == "MayStopSearch":
                fungibility[key] = stop
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
    out = {"name": pod_set["name"], "count": pod_set.get("count", 1), "template": template}
    if pod_set.get("minCount") is not None:
        out["minCount"] = pod_set["minCount"]
    if pod_set.get("topologyRequest"):
        out["topologyRequest"] = pod_set["topologyRequest"]
    return out


def workload_spec_to_kueue(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in ("podSets", "priorityClassName", "priorityClassSource")}
    out["podSets"] = [_kueue_pod_set(ps) for ps in spec.get("podSets") or ()]
    if spec.get("priorityClassName"):
        pod_class = spec.get("priorityClassSource") == POD_PRIORITY_CLASS_SOURCE
        out["priorityClassRef"] = {
            "group": POD_PRIORITY_CLASS_GROUP if pod_class else KUEUE_GROUP,
            "kind": POD_PRIORITY_CLASS_KIND if pod_class else PRIORITY_CLASS_KIND,
            "name": spec["priorityClassName"],
        }
    return out


def _kueue_condition(condition: Mapping[str, Any], preempted: bool) -> dict[str, Any]:
    out = dict(condition)
    if condition.get("status") == "True" and condition.get("type") == "Evicted" and preempted:
        out["reason"] = "Preempted"  # Kueue's Evicted reason; the detail is on Preempted
    elif (
        condition.get("status") == "False"
        and condition.get("type") == "Admitted"
        and condition.get("reason") != UNSATISFIED_CHECKS  # quota reserved: Kueue's reason too
    ):
        out["reason"] = "NoReservation"
    return out


def workload_status_to_kueue(status: dict[str, Any]) -> dict[str, Any]:
    conditions = status.get("conditions") or []
    preempted = any(c.get("type") == "Preempted" and c.get("status") == "True" for c in conditions)
    out = {k: v for k, v in status.items() if k != "pendingReason"}
    if conditions:
        out["conditions"] = [_kueue_condition(c, preempted) for c in conditions]
    admission = status.get("admission")
    if admission and any("topologyAssignment" in ps for ps in admission.get("podSetAssignments") or ()):
        out["admission"] = {
            **admission,
            "podSetAssignments": [
                {**ps, "topologyAssignment": topology_assignment_to_slices(ps["topologyAssignment"])}
                if "topologyAssignment" in ps
                else ps
                for ps in admission["podSetAssignments"]
            ],
        }
    return out


def _common_prefix(values: list[str]) -> str:
    prefix = min(values)
    for value in values:
        while not value.startswith(prefix):
            prefix = prefix[:-1]
    # Every root must stay non-empty (Kueue's roots have MinLength 1 per item).
    while prefix and any(len(v) == len(prefix) for v in values):
        prefix = prefix[:-1]
    return prefix


def topology_assignment_to_slices(assignment: Mapping[str, Any]) -> dict[str, Any]:
    """v1beta1 ``{levels, domains[{values, count}]}`` -> v1beta2 ``{levels, slices}``."""
    levels = list(assignment.get("levels") or ())
    domains = list(assignment.get("domains") or ())
    if not domains:
        return {"levels": levels, "slices": []}
    per_level: list[dict[str, Any]] = []
    for index in range(len(levels)):
        values = [str(d["values"][index]) for d in domains]
        if len(set(values)) == 1:
            per_level.append({"universal": values[0]})
            continue
        prefix = _common_prefix(values)
        individual: dict[str, Any] = {"roots": [v[len(prefix) :] for v in values]}
        if prefix:
            individual["prefix"] = prefix
        per_level.append({"individual": individual})
    counts = [int(d["count"]) for d in domains]
    pod_counts = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    return {
        "levels": levels,
        "slices": [{"domainCount": len(domains), "valuesPerLevel": per_level, "podCounts": pod_counts}],
    }


def topology_assignment_from_slices(raw: Mapping[str, Any]) -> TopologyAssignment:
    """v1beta2 ``{levels, slices}`` (any variation) -> the engine's assignment."""
    levels = tuple(str(level) for level in raw.get("levels") or ())
    domains: list[TopologyDomain] = []
    for piece in raw.get("slices") or ():
        size = int(piece.get("domainCount") or 0)
        columns: list[list[str]] = []
        for entry in piece.get("valuesPerLevel") or ():
            if "universal" in entry:
                columns.append([str(entry["universal"])] * size)
            else:
                individual = entry.get("individual") or {}
                prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
                columns.append([f"{prefix}{root}{suffix}" for root in individual.get("roots") or ()])
        counts_raw = piece.get("podCounts") or {}
        counts = (
            [int(counts_raw["universal"])] * size
            if "universal" in counts_raw
            else [int(c) for c in counts_raw.get("individual") or ()]
        )
        for index in range(size):
            domains.append(TopologyDomain(tuple(column[index] for column in columns), counts[index]))
    return TopologyAssignment(levels, tuple(domains))


def local_queue_status_to_kueue(status: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in status.items() if k != "flavorUsage"}
    if "flavorUsage" in status:
        out["flavorsUsage"] = status["flavorUsage"]
    return out
