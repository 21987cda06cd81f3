"""Topology in ``rayquota explain``: the engine copy gets the Topologies, Nodes and bound pods
the operator's feed gives it, and the explanation says how much room each domain of the level
a pod set asks for has.

A pod counts in a Workload when it belongs to the Workload's Ray object (found by the labels
KubeRay puts on pods: the RayJob or RayService it originated from, else its RayCluster), as
the operator counts it; any other pod takes room of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rayquota.operator.queue.adapters import ADAPTERS, CLUSTER_KIND
from rayquota.operator.queue.adapters.capabilities import ChildrenMarkedByLabel
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.topology_feed import BOUND_AND_RUNNING, cluster_node, pod_key
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.operator.ray.vocabulary import labels
from rayquota.queueing import Engine, TopologyMode, Workload, format_quantity
from rayquota.queueing.topology.fit import level_name

if TYPE_CHECKING:
    from rayquota.operator.kube import KubeClient

Obj = Mapping[str, Any]
_NOT_MAIN = ("cpu", "memory", "pods", "ephemeral-storage")


def _owner(pod: Obj, clusters: Mapping[tuple[str, str], Obj]) -> tuple[str, str] | None:
    """(owner kind as the Workload labels name it, owner name) of a Ray pod: the queued object
    its cluster is accounted through (a RayJob, a RayService), else the cluster; a pod outside
    a cluster marked as a child of a kind (a RayJob's submitter): that kind's object."""
    meta = pod["metadata"]
    pod_labels = meta.get("labels") or {}
    cluster_name = pod_labels.get(labels.RAY_CLUSTER)
    if cluster_name:
        cluster = clusters.get((str(meta.get("namespace")), str(cluster_name)))
        parents = ADAPTERS[CLUSTER_KIND].accounted_through
        for ref in (cluster or {}).get("metadata", {}).get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") in parents:
                return str(ref["kind"]).lower(), str(ref["name"])
        return CLUSTER_KIND.lower(), str(cluster_name)
    owner_name = pod_labels.get(labels.ORIGINATED_FROM_CR_NAME)
    for kind, adapter in ADAPTERS.items():
        if owner_name and isinstance(adapter, ChildrenMarkedByLabel):
            key, value = adapter.child_marker
            if pod_labels.get(key) == value:
                return kind.lower(), str(owner_name)
    return None


async def fetch(state: Any, connect: Callable[[], KubeClient] | None = None, api: Any = None) -> None:
    """Into a ``cli_views.QueueState``: the Topologies, Nodes, bound pods and RayClusters
    (``connect`` opens the client; default: in-cluster credentials or $KUBECONFIG; ``api``: the
    ``QueueApi`` the views read, rayquota.io by default)."""
    from rayquota.operator.core import resources
    from rayquota.operator.kube import KubeClient
    from rayquota.operator.queue.kueue.api_group import RAYQUOTA

    client = (connect or KubeClient.from_environment)()
    try:
        state.topologies = await client.list_items((api or RAYQUOTA).topologies.path())
        state.nodes = await client.list_items(resources.NODES.path())
        result = await client.request(
            "GET", resources.PODS.path(), params={"fieldSelector": BOUND_AND_RUNNING}
        )
        state.pods = list(result.get("items") or [])
        state.clusters = await client.list_items(resources.RAYCLUSTERS.path())
    finally:
        await client.close()


def feed(
    engine: Engine,
    topologies: Iterable[Obj],
    nodes: Iterable[Obj],
    pods: Iterable[Obj],
    workloads: Iterable[Obj],
    clusters: Iterable[Obj] = (),
) -> None:
    """Topologies, nodes and bound pods into an engine, as the operator's feed does."""
    by_name = {(str(c["metadata"].get("namespace")), str(c["metadata"]["name"])): c for c in clusters}
    for body in topologies:
        try:
            engine.upsert_topology(converter.topology(body))
        except converter.ConversionError:
            continue
    for body in nodes:
        engine.upsert_node(cluster_node(body))
    by_owner: dict[tuple[str, str, str], str] = {}
    for wl in workloads:
        meta = wl["metadata"]
        owner_labels = meta.get("labels") or {}
        kind, name = owner_labels.get("rayquota.io/owner-kind"), owner_labels.get("rayquota.io/owner-name")
        if kind and name:
            by_owner[(str(meta["namespace"]), str(kind), str(name))] = f"{meta['namespace']}/{meta['name']}"
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        owner = _owner(pod, by_name)
        workload = by_owner.get((str(pod["metadata"].get("namespace")), *owner)) if owner else None
        engine.upsert_pod(pod_key(pod), str(node), pod_requests(pod.get("spec") or {}), workload)


def room_lines(engine: Engine, spec: Workload, flavors: Sequence[str]) -> list[str]:
    """Per pod set that asks for a level on a topology flavor: each domain's free room."""
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for pod_set in spec.pod_sets:
        request = pod_set.topology_request
        if request is None or request.invalid is not None:
            continue
        resource = _main_resource(pod_set.requests)
        for flavor_name in flavors:
            flavor = engine.flavor_spec(flavor_name)
            topology = engine.topology_spec(flavor.topology_name) if flavor and flavor.topology_name else None
            if topology is None:
                continue
            level = (
                request.level if request.mode is not TopologyMode.UNCONSTRAINED and request.level else None
            )
            level = level or request.slice_level or topology.levels[0]
            if (flavor_name, level, resource) in seen:
                continue
            seen.add((flavor_name, level, resource))
            room = engine.topology_room(flavor_name, level, resource)
            if not room:
                continue
            per_domain = ", ".join(
                f"{value} {format_quantity(free, resource)}/{format_quantity(size, resource)}"
                for value, free, size in room
            )
            lines.append(
                f"  room per {level_name(level)} in flavor {flavor_name} "
                f"({resource} free/allocatable): {per_domain}"
            )
    return lines


def _main_resource(requests: Mapping[str, int]) -> str:
    special = sorted(r for r, q in requests.items() if q and r not in _NOT_MAIN)
    return special[0] if special else "cpu"
