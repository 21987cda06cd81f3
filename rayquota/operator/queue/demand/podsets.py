"""The shapes of what a queued object asks of the quota, and the helpers every kind's demand
(in its integration record, `adapters/<kind>.py`) is built from.

A *pod set* is ``count`` pods of one shape (per-pod requests in milli-units, plus the
nodeSelector, required node affinity and tolerations that flavor assignment looks at). A kind's
demand names the pod sets an object needs and which *part* of the object each pod belongs to (a
RayService's parts are its child RayClusters, gated one by one).

Pure: the inputs are API bodies (camelCase dicts as the API server returns them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from rayquota.api.queueing_v1alpha1 import MAX_POD_SETS
from rayquota.operator.core.pods import pod_finished
from rayquota.operator.queue import naming
from rayquota.operator.queue.demand import node_affinity, topology_request
from rayquota.operator.queue.dra import context as dra
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.operator.ray.builders.podspec import (
    PodContext,
    build_autoscaler_container,
    build_wait_gcs_init_container,
    ray_container_index,
)
from rayquota.operator.ray.raycluster.plan import desired_pods
from rayquota.operator.ray.raycluster.redis_cleanup import cleanup_requests
from rayquota.operator.ray.raycluster.redis_cleanup import wanted as redis_cleanup_wanted
from rayquota.operator.ray.vocabulary import labels
from rayquota.queueing import TopologyRequest

HEAD_POD_SET = "head"
SUBMITTER_POD_SET = "submitter"


class Role(StrEnum):
    HEAD = "head"
    WORKER = "worker"
    SUBMITTER = "submitter"
    # The one pod set of a non-Ray kind (a batch/v1 Job): all its pods alike.
    MAIN = "main"


@dataclass(frozen=True)
class PodSetDemand:
    """``count`` pods of one shape. ``requests`` are per pod, in milli-units."""

    name: str
    role: Role
    count: int
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_request: TopologyRequest | None = None
    """Kueue's topology annotations on the template (see :mod:`.topology_request`); one that
    could not be read is a request marked ``invalid``: the pod set waits with that reason."""
    min_count: int | None = None
    """Kueue's ``minCount`` (partial admission): as few pods as the object can run with."""
    node_affinity: tuple[Mapping[str, Any], ...] = ()
    """The template's required node selector terms, as written (see :mod:`.node_affinity`)."""

    def totals(self) -> dict[str, int]:
        return {r: q * self.count for r, q in self.requests.items() if q}


GroupKey = tuple[Role, str]
"""A pod's place inside one part: (role, worker group name; "" for head and submitter)."""


@dataclass(frozen=True)
class Demand:
    """Everything an object asks for, and how its parts map onto the pod sets.

    ``parts`` lists the gateable units in the order they should be covered (for a
    RayService: the active child first), each with ``{pod set name: pods}``;
    ``pod_set_of[part][group]`` names the pod set a pod of that part and group counts in.
    """

    pod_sets: tuple[PodSetDemand, ...]
    parts: Mapping[str, Mapping[str, int]]
    pod_set_of: Mapping[str, Mapping[GroupKey, str]]

    def counts(self) -> dict[str, int]:
        return {ps.name: ps.count for ps in self.pod_sets}


# --- pod shapes -----------------------------------------------------------------------------


def injected_placement(template: Mapping[str, Any]) -> dict[str, Any]:
    """The nodeSelector/tolerations the queue integration injected into a template (if any)."""
    raw = ((template.get("metadata") or {}).get("annotations") or {}).get(naming.INJECTED_ANNOTATION)
    if not raw:
        return {}
    parsed = json.loads(raw)
    return parsed if isinstance(parsed, dict) else {}


def user_placement(template: Mapping[str, Any]) -> tuple[dict[str, str], tuple[Mapping[str, Any], ...]]:
    """The template's nodeSelector and tolerations without what the queue integration injected:
    the shape stays the same before and after admission."""
    spec = template.get("spec") or {}
    injected = injected_placement(template)
    injected_selector = injected.get("nodeSelector") or {}
    injected_tolerations = injected.get("tolerations") or []
    selector = {
        k: str(v) for k, v in (spec.get("nodeSelector") or {}).items() if injected_selector.get(k) != v
    }
    tolerations = tuple(t for t in spec.get("tolerations") or [] if t not in injected_tolerations)
    return selector, tolerations


def pod_set(
    name: str,
    role: Role,
    count: int,
    template: Mapping[str, Any],
    extra: Sequence[Any] = (),
    where: str = "",
    hosts: int = 1,
    extra_init: Sequence[Any] = (),
    claims: ClaimReading | None = None,
) -> PodSetDemand:
    """``claims``: the reading the pod's DRA claims and DeviceClass-backed extended resources
    are counted under (``dra/context.py``); without one they are charged nothing."""
    spec = dict(template.get("spec") or {})
    if extra:
        spec["containers"] = [*(spec.get("containers") or []), *extra]
    if extra_init:
        spec["initContainers"] = [*(spec.get("initContainers") or []), *extra_init]
    selector, tolerations = user_placement(template)
    where = where or f"{name} pod template"
    try:
        topology = topology_request.read(template, where, hosts)
    except topology_request.TopologyAnnotationError as exc:
        topology = TopologyRequest(invalid=str(exc))
    requests = dict(dra.backed(spec, pod_requests(spec), where, claims).requests)
    for resource, amount in dra.charges(spec, where, claims).requests.items():
        requests[resource] = requests.get(resource, 0) + amount
    affinity = node_affinity.required_terms(spec)
    return PodSetDemand(name, role, count, requests, selector, tolerations, topology, node_affinity=affinity)


def shape_key(pod_set: PodSetDemand) -> str:
    """A stable digest of what makes two pods interchangeable for quota."""
    shape = {
        "requests": sorted(pod_set.requests.items()),
        "nodeSelector": sorted(pod_set.node_selector.items()),
        "tolerations": sorted(json.dumps(t, sort_keys=True) for t in pod_set.tolerations),
    }
    if pod_set.topology_request is not None:
        shape["topology"] = repr(pod_set.topology_request)
    if pod_set.node_affinity:
        shape["nodeAffinity"] = json.dumps(pod_set.node_affinity, sort_keys=True)
    return naming.short_hash(json.dumps(shape, sort_keys=True))


# --- RayCluster -----------------------------------------------------------------------------


def worker_pod_set_name(group_name: str) -> str:
    name = naming.dns_label(group_name)
    # A group called "head" or "submitter" must not merge with those pod sets.
    return (
        name if name not in (HEAD_POD_SET, SUBMITTER_POD_SET) else f"{name}-{naming.short_hash(group_name)}"
    )


def _sizing_context(cluster_spec: Mapping[str, Any]) -> PodContext:
    """A stand-in cluster for the containers the pod builder adds: only their sizes matter."""
    return PodContext(
        cluster={"metadata": {"name": "sizing", "namespace": "sizing"}, "spec": cluster_spec},
        operator_version="",
        spec_hash="",
    )


def _autoscaler_containers(cluster_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not cluster_spec.get("enableInTreeAutoscaling"):
        return []
    head_template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    ray_container = ((head_template.get("spec") or {}).get("containers") or [{}])[0]
    return [build_autoscaler_container(_sizing_context(cluster_spec), ray_container)]


def _worker_init_containers(
    cluster_spec: Mapping[str, Any], template: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The wait-for-GCS init container the pod builder gives every worker: a worker asking for
    less CPU or memory than it still reserves that much while it waits."""
    spec = template.get("spec") or {}
    if any(c.get("name") == labels.WAIT_GCS_INIT_CONTAINER for c in spec.get("initContainers") or []):
        return []
    ray_container = spec["containers"][ray_container_index(spec)] if spec.get("containers") else {}
    return [build_wait_gcs_init_container(_sizing_context(cluster_spec), ray_container)]


def cluster_pod_sets(
    cluster_spec: Mapping[str, Any],
    head_extra: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    claims: ClaimReading | None = None,
) -> list[tuple[GroupKey, PodSetDemand]]:
    """Head (with the autoscaler sidecar when autoscaling is on, and ``head_extra``
    containers) and one pod set per worker group: replicas x numOfHosts.

    With GCS fault tolerance on Redis (``annotations``: the cluster's, for the older
    ``ray.io/ft-enabled`` form) the head also covers the Redis cleanup Job's pod, which runs in
    its place once it is gone: each resource is the larger of the two, as Kueue counts it.
    ``claims``: the reading every template's DRA claims are counted under."""
    head_template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    extra = [*_autoscaler_containers(cluster_spec), *head_extra]
    head = pod_set(HEAD_POD_SET, Role.HEAD, 1, head_template, extra, "the head's pod template", claims=claims)
    if redis_cleanup_wanted({"metadata": {"annotations": dict(annotations or {})}, "spec": cluster_spec}):
        cleanup = cleanup_requests()
        covered = {r: max(head.requests.get(r, 0), cleanup.get(r, 0)) for r in {*head.requests, *cleanup}}
        head = replace(head, requests=covered)
    out = [((Role.HEAD, ""), head)]
    for group in cluster_spec.get("workerGroupSpecs") or []:
        name = str(group.get("groupName") or "")
        template = group.get("template") or {}
        hosts = int(group.get("numOfHosts") or 1)
        where = f"worker group {name}'s pod template"
        worker = pod_set(
            worker_pod_set_name(name),
            Role.WORKER,
            desired_pods(group),
            template,
            (),
            where,
            hosts,
            extra_init=_worker_init_containers(cluster_spec, template),
            claims=claims,
        )
        out.append(((Role.WORKER, name), worker))
    return out


def single_part(part: str, keyed: Sequence[tuple[GroupKey, PodSetDemand]]) -> Demand:
    pod_sets = tuple(ps for _, ps in keyed)
    return Demand(
        pod_sets,
        {part: {ps.name: ps.count for ps in pod_sets}},
        {part: {key: ps.name for key, ps in keyed}},
    )


# --- the Workload's pod set limit -----------------------------------------------------------


def too_many_pod_sets(kind: str, obj: Mapping[str, Any], demand: Demand) -> str | None:
    """Why ``demand`` cannot be one Workload (more pod sets than a Workload holds), or None.

    Pod sets of one shape are already merged across a RayService's children; what is left
    differs in shape (or belongs to one cluster's separate groups, whose pods the planner caps
    group by group), so merging further would either over-count quota or loosen a cap. The
    object is refused instead: a part that is not admitted yet stays gated, and what runs keeps
    its admission.
    """
    count = len(demand.pod_sets)
    if count <= MAX_POD_SETS:
        return None
    meta = obj["metadata"]
    parts = ", ".join(f"{part} ({len(needs)})" for part, needs in demand.parts.items())
    return (
        f"{kind} {meta.get('namespace')}/{meta['name']} needs {count} pod sets of different shapes "
        f"(per cluster: {parts}); a Workload holds at most {MAX_POD_SETS}, so what is not admitted "
        "yet stays suspended until fewer groups or shapes are needed"
    )


# --- totals and release timing --------------------------------------------------------------


def resource_totals(pod_sets: Iterable[PodSetDemand]) -> dict[str, int]:
    """Resources summed over pod sets, per resource (milli-units): the status columns' numbers."""
    out: dict[str, int] = {}
    for ps in pod_sets:
        for resource, amount in ps.totals().items():
            out[resource] = out.get(resource, 0) + amount
    return out


GroupOfPod = Callable[[Mapping[str, Any]], GroupKey]
"""Which group of its object a pod belongs to: the kind's own rule (``KindAdapter.group_of_pod``)."""


def pods_per_pod_set(
    demand: Demand,
    pods_by_part: Mapping[str, Sequence[Mapping[str, Any]]],
    group_of_pod: GroupOfPod,
    counts: Callable[[Mapping[str, Any]], bool],
) -> dict[str, int]:
    """Per pod set, how many of its pods ``counts``; a pod's pod set is found by the kind's
    ``group_of_pod`` (a batch/v1 Job's pods are its main pod set, not a Ray worker group)."""
    out: dict[str, int] = {}
    for part, pods in pods_by_part.items():
        names = demand.pod_set_of.get(part, {})
        by_label = {(role, labels.label_value(group)): name for (role, group), name in names.items()}
        for pod in pods:
            if not counts(pod):
                continue
            name = by_label.get(group_of_pod(pod))
            if name is not None:
                out[name] = out.get(name, 0) + 1
    return out


def live_pods_per_pod_set(
    demand: Demand,
    pods_by_part: Mapping[str, Sequence[Mapping[str, Any]]],
    group_of_pod: GroupOfPod,
) -> dict[str, int]:
    """How many pods that hold quota (not finished; terminating ones still do) each pod set has,
    grouped by the kind's own rule (no default: the Ray rule misplaces other kinds' pods)."""
    return pods_per_pod_set(demand, pods_by_part, group_of_pod, lambda pod: not pod_finished(pod))


def held_demand(demand: Demand, live_pods: Mapping[str, int]) -> tuple[PodSetDemand, ...]:
    """The demand to account: a pod set never counts fewer pods than are still alive, so a
    scale-down frees quota only once the surplus pods are gone."""
    out = []
    for ps in demand.pod_sets:
        live = live_pods.get(ps.name, 0)
        out.append(ps if live <= ps.count else replace(ps, count=live))
    return tuple(out)
