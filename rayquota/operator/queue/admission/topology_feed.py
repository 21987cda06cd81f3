"""The engine's topology snapshot, fed by informers: Topology objects, Nodes, and the pods
bound to nodes.

Incremental, like every other engine event: a node's labels, allocatable, taints, readiness
and cordon as they change; each bound pod that has not finished with its requests and, when it
belongs to a queued object, the Workload it counts in (while that Workload holds a topology
assignment, the assignment accounts for the pod). The pods come from a watch with a field
selector (bound, not finished), so finished and pending pods never reach the process; a pod
that finishes arrives as a deletion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from rayquota.operator.core.cache.informer import DELETED
from rayquota.operator.queue.admission import converter
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.queueing import ClusterNode, Engine, Taint, parse_quantity

log = logging.getLogger(__name__)

BOUND_AND_RUNNING = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The field selector of the pods that hold room on a node."""

Handler = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], None]
OwnerOfPod = Callable[[Mapping[str, Any]], str | None]


def cluster_node(body: Mapping[str, Any]) -> ClusterNode:
    meta = body["metadata"]
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    allocatable: dict[str, int] = {}
    for resource, value in (status.get("allocatable") or {}).items():
        try:
            allocatable[str(resource)] = parse_quantity(str(value))
        except ValueError:
            log.warning(
                "node %s: allocatable %s=%r is not a quantity; ignored", meta["name"], resource, value
            )
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in spec.get("taints") or ()
    )
    return ClusterNode(
        str(meta["name"]),
        {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        allocatable,
        taints,
        ready,
        bool(spec.get("unschedulable")),
    )


def pod_key(body: Mapping[str, Any]) -> str:
    return f"{body['metadata'].get('namespace')}/{body['metadata']['name']}"


class TopologyFeed:
    """Informer callbacks that turn Topology, Node and Pod events into engine events."""

    def __init__(self, engine: Engine, request_cycle: Callable[[], None], owner_of_pod: OwnerOfPod) -> None:
        self.engine = engine
        self.request_cycle = request_cycle
        self.owner_of_pod = owner_of_pod

    def on_topology(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event == DELETED:
            self.engine.delete_topology(name)
        else:
            try:
                self.engine.upsert_topology(converter.topology(obj))
            except converter.ConversionError as exc:
                log.warning("Topology %s ignored: %s", name, exc)
                return
        self.request_cycle()

    def on_node(self, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        if event == DELETED:
            self.engine.delete_node(str(obj["metadata"]["name"]))
        else:
            node = cluster_node(obj)
            if old is not None and cluster_node(old) == node:
                return  # a heartbeat: nothing placement looks at changed
            self.engine.upsert_node(node)
        self.request_cycle()

    def on_pod(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        key = pod_key(obj)
        node = (obj.get("spec") or {}).get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        if event == DELETED or not node or phase in ("Succeeded", "Failed"):
            self.engine.delete_pod(key)
            self.request_cycle()
            return
        try:
            requests = pod_requests(obj.get("spec") or {})
        except ValueError:
            return  # the API server would not have taken it; nothing to count
        self.engine.upsert_pod(key, str(node), requests, self.owner_of_pod(obj))
