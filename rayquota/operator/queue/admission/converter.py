"""API objects -> the engine's model, and the engine's admissions -> API status.

The one translation between ``rayquota.io/v1alpha1`` (or Kueue's ``kueue.x-k8s.io/v1beta2``,
whose renamed fields :mod:`kueue_shapes` normalises) bodies and :mod:`rayquota.queueing`. Bodies are camelCase
dicts as the API server returns them; the ``*_from_spec`` functions take a name and
the spec, so the simulator's scenario files (which inline the spec) use them too.

Errors name the field: ``ConversionError("clusterQueue team-a.resourceGroups[0]...: ...")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rayquota.operator.core.memo import BoundedMemo
from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.queue.admission import creation_order
from rayquota.operator.queue.demand import node_affinity, topology_request
from rayquota.operator.queue.demand.podsets import PodSetDemand
from rayquota.operator.queue.demand.priorities import POD_PRIORITY_CLASS_SOURCE
from rayquota.operator.queue.kueue import kueue_shapes, namespace_selection
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.queueing import (
    AdmissionCheck,
    AdmissionCheckRule,
    AdmissionMode,
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorFungibilityPreference,
    FlavorQuotas,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    Preemption,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    Toleration,
    Topology,
    TopologyAssignment,
    TopologyDomain,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadEviction,
    format_quantity,
    parse_quantity,
)


class ConversionError(ValueError):
    """An object the engine cannot take; the message names the field."""


def _name(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name", ""))


# --- flavors, cohorts, queues ---------------------------------------------------------------


def toleration(raw: Mapping[str, Any]) -> Toleration:
    return Toleration(
        str(raw.get("key") or ""),
        str(raw.get("operator") or "Equal"),
        str(raw.get("value") or ""),
        str(raw.get("effect") or ""),
    )


def flavor_from_spec(name: str, spec: Mapping[str, Any]) -> ResourceFlavor:
    return ResourceFlavor(
        name,
        {str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()},
        tuple(
            Taint(str(t["key"]), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
            for t in spec.get("nodeTaints") or ()
        ),
        tuple(toleration(t) for t in spec.get("tolerations") or ()),
        str(spec["topologyName"]) if spec.get("topologyName") else None,
    )


def topology_from_spec(name: str, spec: Mapping[str, Any]) -> Topology:
    levels = tuple(str(level.get("nodeLabel") or "") for level in spec.get("levels") or ())
    if not levels or not all(levels):
        raise ConversionError(f"topology {name}.spec.levels: every level needs a nodeLabel")
    return Topology(name, levels)


def topology(body: Mapping[str, Any]) -> Topology:
    return topology_from_spec(_name(body), body.get("spec") or {})


def resource_groups(raw: Sequence[Mapping[str, Any]] | None, where: str) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    for gi, group in enumerate(raw or ()):
        flavors: list[FlavorQuotas] = []
        for fi, flavor in enumerate(group.get("flavors") or ()):
            field = f"{where}.resourceGroups[{gi}].flavors[{fi}]"
            resources: dict[str, ResourceQuota] = {}
            for resource in flavor.get("resources") or ():
                try:
                    resources[str(resource["name"])] = ResourceQuota.of(
                        resource["nominalQuota"],
                        resource.get("borrowingLimit"),
                        resource.get("lendingLimit"),
                    )
                except KeyError as exc:
                    raise ConversionError(f"{field}: missing {exc.args[0]}") from exc
                except ValueError as exc:
                    raise ConversionError(f"{field}: {exc}") from exc
            if "name" not in flavor:
                raise ConversionError(f"{field}: missing name")
            flavors.append(FlavorQuotas(str(flavor["name"]), resources))
        covered = tuple(str(r) for r in group.get("coveredResources") or ())
        if not covered:
            covered = tuple(sorted({r for f in flavors for r in f.resources}))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def label_selector(
    raw: Mapping[str, Any] | None, *, unset_selects_nothing: bool = False
) -> LabelSelector | None:
    """``None`` (every namespace) for an unset selector, unless ``unset_selects_nothing`` (Kueue's
    meaning of a ClusterQueue's unset ``namespaceSelector``, see :mod:`namespace_selection`)."""
    if raw is None:
        return LabelSelector(selects_nothing=True) if unset_selects_nothing else None
    return LabelSelector(
        {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()},
        tuple(
            LabelSelectorRequirement(
                str(e["key"]), str(e["operator"]), tuple(str(v) for v in e.get("values") or ())
            )
            for e in raw.get("matchExpressions") or ()
        ),
    )


def _weight(raw: Mapping[str, Any] | None) -> float:
    weight = (raw or {}).get("weight")
    return 1.0 if weight is None else parse_quantity(str(weight)) / 1000


def cluster_queue_from_spec(
    name: str, spec: Mapping[str, Any], cohort: str | None = None, *, unset_selects_nothing: bool = False
) -> ClusterQueue:
    """``unset_selects_nothing``: an unset ``namespaceSelector`` admits from no namespace (Kueue's
    ClusterQueues); otherwise from every one (rayquota.io's)."""
    where = f"clusterQueue {name}"
    spec = kueue_shapes.rayquota_spec(spec)
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    fungibility = spec.get("flavorFungibility") or {}
    try:
        return ClusterQueue(
            name=name,
            resource_groups=resource_groups(spec.get("resourceGroups"), where),
            cohort=cohort if cohort is not None else (spec.get("cohort") or None),
            queueing_strategy=QueueingStrategy(spec.get("queueingStrategy") or "BestEffortFIFO"),
            namespace_selector=label_selector(
                spec.get("namespaceSelector"), unset_selects_nothing=unset_selects_nothing
            ),
            preemption=Preemption(
                WithinClusterQueuePolicy(preemption.get("withinClusterQueue") or "Never"),
                ReclaimWithinCohortPolicy(preemption.get("reclaimWithinCohort") or "Never"),
                BorrowWithinCohort(
                    BorrowWithinCohortPolicy(borrow.get("policy") or "Never"),
                    borrow.get("maxPriorityThreshold"),
                ),
            ),
            flavor_fungibility=flavor_fungibility(fungibility, where),
            stop_policy=StopPolicy(spec.get("stopPolicy") or "None"),
            fair_sharing_weight=_weight(spec.get("fairSharing")),
            admission_checks=admission_check_rules(spec),
            admission_mode=admission_mode(spec, where),
        )
    except ConversionError:
        raise
    except ValueError as exc:
        raise ConversionError(f"{where}: {exc}") from exc


def admission_mode(spec: Mapping[str, Any], where: str) -> AdmissionMode:
    """``spec.admissionScope.admissionMode`` (unset: no admission fair sharing)."""
    raw = (spec.get("admissionScope") or {}).get("admissionMode") or "NoAdmissionFairSharing"
    try:
        return AdmissionMode(raw)
    except ValueError:
        known = ", ".join(m.value for m in AdmissionMode)
        raise ConversionError(
            f"{where}.admissionScope.admissionMode: {raw!r} is not one of {known}"
        ) from None


def flavor_fungibility(raw: Mapping[str, Any], where: str) -> FlavorFungibility:
    """``spec.flavorFungibility``; a ``preference`` only with both policies ``TryNextFlavor``
    (Kueue's rule: otherwise the search stops before the flavors could be compared)."""
    fungibility = FlavorFungibility(
        WhenCanBorrow(raw.get("whenCanBorrow") or "Borrow"),
        WhenCanPreempt(raw.get("whenCanPreempt") or "TryNextFlavor"),
        FlavorFungibilityPreference(raw["preference"]) if raw.get("preference") else None,
    )
    trying_next = (WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.TRY_NEXT_FLAVOR)
    if fungibility.preference is not None and (
        (fungibility.when_can_borrow, fungibility.when_can_preempt) != trying_next
    ):
        raise ConversionError(
            f"{where}.flavorFungibility.preference: {fungibility.preference.value} needs whenCanBorrow "
            f"and whenCanPreempt both TryNextFlavor (they are {fungibility.when_can_borrow.value} and "
            f"{fungibility.when_can_preempt.value})"
        )
    return fungibility


def admission_check_rules(spec: Mapping[str, Any]) -> tuple[AdmissionCheckRule, ...]:
    """``spec.admissionChecks`` (every flavor; Kueue v1beta1's list) or
    ``spec.admissionChecksStrategy.admissionChecks`` (per flavor; Kueue v1beta2's only form)."""
    names = spec.get("admissionChecks") or []
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return tuple(AdmissionCheckRule(str(n)) for n in names) + tuple(
        AdmissionCheckRule(str(r["name"]), tuple(str(f) for f in r.get("onFlavors") or ())) for r in strategy
    )


def admission_check(body: Mapping[str, Any]) -> AdmissionCheck:
    """An AdmissionCheck object (ours or Kueue's): usable only while its controller says Active."""
    spec = body.get("spec") or {}
    active = next(
        (c for c in (body.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), None
    )
    is_active = active is not None and active.get("status") == "True"
    message = "" if is_active else str((active or {}).get("message") or "no controller has marked it Active")
    return AdmissionCheck(_name(body), str(spec.get("controllerName") or ""), is_active, message)


def cohort_from_spec(name: str, spec: Mapping[str, Any]) -> Cohort:
    spec = kueue_shapes.rayquota_spec(spec)
    groups = resource_groups(spec.get("resourceGroups"), f"cohort {name}")
    try:
        weight = _weight(spec.get("fairSharing"))
    except ValueError as exc:
        raise ConversionError(f"cohort {name}.spec.fairSharing.weight: {exc}") from exc
    return Cohort(name, spec.get("parent") or None, groups, weight)


def resource_flavor(body: Mapping[str, Any]) -> ResourceFlavor:
    return flavor_from_spec(_name(body), body.get("spec") or {})


def cluster_queue(body: Mapping[str, Any]) -> ClusterQueue:
    return cluster_queue_from_spec(
        _name(body),
        body.get("spec") or {},
        unset_selects_nothing=namespace_selection.unset_selector_selects_nothing(body),
    )


def cohort(body: Mapping[str, Any]) -> Cohort:
    return cohort_from_spec(_name(body), body.get("spec") or {})


def local_queue(body: Mapping[str, Any]) -> LocalQueue:
    spec = body.get("spec") or {}
    try:
        stop = StopPolicy(spec.get("stopPolicy") or "None")
    except ValueError as exc:
        raise ConversionError(f"localQueue {_name(body)}.spec.stopPolicy: {exc}") from exc
    try:
        weight = _weight(spec.get("fairSharing"))
    except ValueError as exc:
        raise ConversionError(f"localQueue {_name(body)}.spec.fairSharing.weight: {exc}") from exc
    return LocalQueue(
        str(body["metadata"]["namespace"]), _name(body), str(spec.get("clusterQueue", "")), stop, weight
    )


# --- workloads ------------------------------------------------------------------------------


def engine_pod_set(demand: PodSetDemand) -> PodSet:
    return PodSet(
        demand.name,
        demand.count,
        dict(demand.requests),
        dict(demand.node_selector),
        tuple(toleration(t) for t in demand.tolerations),
        demand.topology_request,
        demand.min_count,
        node_affinity.from_api(demand.node_affinity, f"pod set {demand.name} template.spec"),
    )


def api_pod_set(demand: PodSetDemand) -> dict[str, Any]:
    """A Workload's ``spec.podSets[]`` entry: per-pod requests, and a template only to carry
    the nodeSelector, required node affinity and tolerations flavor assignment must respect."""
    out: dict[str, Any] = {
        "name": demand.name,
        "count": demand.count,
        "requests": {r: format_quantity(q, r) for r, q in sorted(demand.requests.items())},
    }
    if demand.min_count is not None:
        out["minCount"] = demand.min_count
    if demand.node_selector or demand.tolerations or demand.node_affinity:
        spec: dict[str, Any] = {
            "containers": [],
            "nodeSelector": dict(demand.node_selector),
            "tolerations": [dict(t) for t in demand.tolerations],
        }
        if demand.node_affinity:
            spec["affinity"] = node_affinity.to_api(demand.node_affinity)
        out["template"] = {"spec": spec}
    request = demand.topology_request
    if request is not None and request.invalid is None:
        out["topologyRequest"] = topology_request.to_api(request)
    return out


# Pod sets already converted, by their JSON text: 50,000 Workloads of three shapes need three
# PodSets (immutable), not 50,000 of half a kilobyte each in the engine.
_POD_SETS: BoundedMemo[str, PodSet] = BoundedMemo(4096)


def _pod_set_from_api(raw: Mapping[str, Any], where: str) -> PodSet:
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    return _POD_SETS.get(text, lambda: _convert_pod_set(raw, where))


def _convert_pod_set(raw: Mapping[str, Any], where: str) -> PodSet:
    template_spec = (raw.get("template") or {}).get("spec") or {}
    try:
        if raw.get("requests") is not None:
            requests = {str(r): parse_quantity(q) for r, q in raw["requests"].items()}
        elif template_spec.get("resourceClaims"):
            # Fail closed: the devices of a Workload written without an owner are not read from
            # its namespace's ResourceClaimTemplates (docs/dra.md), so it is not admitted free.
            raise ValueError(
                "template.spec.resourceClaims: DRA claims are counted only for the kinds rayquota "
                "queues (write per-pod requests in podSets[].requests instead)"
            )
        else:
            requests = pod_requests(template_spec)
        affinity = node_affinity.from_api(node_affinity.required_terms(template_spec), "template.spec")
    except ValueError as exc:
        raise ConversionError(f"{where}: {exc}") from exc
    return PodSet(
        str(raw["name"]),
        int(raw.get("count", 1)),
        {r: q for r, q in requests.items() if q},
        {str(k): str(v) for k, v in (template_spec.get("nodeSelector") or {}).items()},
        tuple(toleration(t) for t in template_spec.get("tolerations") or ()),
        topology_request.from_api(raw.get("topologyRequest")),
        None if raw.get("minCount") is None else int(raw["minCount"]),
        affinity,
    )


def timestamp(value: str | None) -> float:
    moment = parse_rfc3339(value)
    return moment.timestamp() if moment is not None else 0.0


PriorityLookup = Callable[[str], int | None]


def workload(body: Mapping[str, Any], priority_of: PriorityLookup = lambda _: None) -> Workload:
    """A Workload object as the engine sees it. ``spec.priority`` wins; else the value of
    ``spec.priorityClassName`` when it names a WorkloadPriorityClass; else 0. Its ``Evicted``
    condition, while true, is its last eviction: the engine orders it by that (Kueue's queue
    order timestamp, :mod:`rayquota.queueing.queue_order`)."""
    meta = body["metadata"]
    spec = kueue_shapes.rayquota_spec(body.get("spec") or {})
    where = f"workload {meta.get('namespace')}/{meta.get('name')}"
    priority = spec.get("priority")
    workload_class = spec.get("priorityClassSource") != POD_PRIORITY_CLASS_SOURCE
    if priority is None and spec.get("priorityClassName") and workload_class:
        priority = priority_of(str(spec["priorityClassName"]))
    pod_sets = tuple(
        _pod_set_from_api(ps, f"{where}.spec.podSets[{i}]") for i, ps in enumerate(spec.get("podSets") or ())
    )
    # Our Workloads queue in their owners' creation order; others in their own (creation_order.py).
    order = creation_order.parse(meta.get("annotations"))
    created, sequence = order if order is not None else (meta.get("creationTimestamp"), 0)
    status = body.get("status") or {}
    requeue_state = status.get("requeueState") or {}
    spec_workload = Workload(
        str(meta["namespace"]),
        str(meta["name"]),
        str(spec.get("queueName") or ""),
        pod_sets,
        priority=int(priority or 0),
        created=timestamp(created),
        active=spec.get("active", True) is not False,
        sequence=sequence,
        # Every slice the driver makes of it keeps this: its pods are known by the Workload.
        pod_owner=f"{meta['namespace']}/{meta['name']}",
        requeue_at=timestamp(requeue_state.get("requeueAt")),
        evicted=last_eviction(body),
    )
    # As Kueue counts a pod set: without the pods its job reports reclaimable (finished).
    return spec_workload.after_reclaim(reclaimable_pods(status.get("reclaimablePods"), where))


def reclaimable_pods(raw: Sequence[Mapping[str, Any]] | None, where: str) -> dict[str, int]:
    """``status.reclaimablePods``: pod set name -> pods that need no quota any more."""
    out: dict[str, int] = {}
    for i, entry in enumerate(raw or ()):
        field = f"{where}.status.reclaimablePods[{i}]"
        count = entry.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ConversionError(f"{field}.count: must be a whole number >= 0, got {count!r}")
        if not entry.get("name"):
            raise ConversionError(f"{field}.name: a pod set name is required, got {entry.get('name')!r}")
        out[str(entry["name"])] = count
    return out


def last_eviction(body: Mapping[str, Any]) -> WorkloadEviction | None:
    """The Workload's ``Evicted`` condition while true, as its reason and lastTransitionTime
    (``None`` without a readable time: the workload then queues by its creation time)."""
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Evicted" and condition.get("status") == "True":
            moment = parse_rfc3339(condition.get("lastTransitionTime"))
            if moment is None:
                return None
            return WorkloadEviction(str(condition.get("reason") or ""), moment.timestamp())
    return None


# --- admissions -----------------------------------------------------------------------------


def topology_assignment_to_api(assignment: TopologyAssignment) -> dict[str, Any]:
    """Kueue v1beta1's shape: ``levels`` and ``domains[{values, count}]``."""
    return {
        "levels": list(assignment.levels),
        "domains": [{"values": list(d.values), "count": d.count} for d in assignment.domains],
    }


def topology_assignment_from_api(raw: Mapping[str, Any] | None) -> TopologyAssignment | None:
    """Either shape: v1beta1's ``domains`` or Kueue v1beta2's ``slices``."""
    if not raw:
        return None
    if "slices" in raw:
        return kueue_shapes.topology_assignment_from_slices(raw)
    return TopologyAssignment(
        tuple(str(level) for level in raw.get("levels") or ()),
        tuple(
            TopologyDomain(tuple(str(v) for v in d.get("values") or ()), int(d.get("count") or 0))
            for d in raw.get("domains") or ()
        ),
    )


def admission_to_api(cluster_queue_name: str, pod_sets: Sequence[PodSetAssignment]) -> dict[str, Any]:
    """``status.admission``: the ClusterQueue and, per pod set, flavor and usage per resource, and
    where its pods go when its flavor has a topology."""
    out: list[dict[str, Any]] = []
    for ps in pod_sets:
        entry: dict[str, Any] = {
            "name": ps.name,
            "count": ps.count,
            "flavors": dict(sorted(ps.flavors.items())),
            "resourceUsage": {r: format_quantity(q, r) for r, q in sorted(ps.usage.items())},
        }
        if ps.topology is not None:
            entry["topologyAssignment"] = topology_assignment_to_api(ps.topology)
        out.append(entry)
    return {"clusterQueue": cluster_queue_name, "podSetAssignments": out}


def admission_from_api(admission: Mapping[str, Any]) -> tuple[str, tuple[PodSetAssignment, ...]]:
    """The inverse of :func:`admission_to_api` (restart: admitted Workloads restore their usage)."""
    pod_sets = tuple(
        PodSetAssignment(
            str(ps["name"]),
            int(ps.get("count") or 0),
            {str(r): str(f) for r, f in (ps.get("flavors") or {}).items()},
            {str(r): parse_quantity(q) for r, q in (ps.get("resourceUsage") or {}).items()},
            topology_assignment_from_api(ps.get("topologyAssignment")),
        )
        for ps in admission.get("podSetAssignments") or ()
    )
    return str(admission["clusterQueue"]), pod_sets
