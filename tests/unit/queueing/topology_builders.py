"""A small data centre for topology tests: blocks of racks of GPU nodes, one flavor on them."""

from __future__ import annotations

from collections.abc import Mapping

from rayquota.queueing import (
    HOSTNAME_LABEL,
    ClusterNode,
    ClusterQueue,
    Engine,
    LocalQueue,
    PodSet,
    Preemption,
    ResourceFlavor,
    Topology,
    TopologyAssignment,
    TopologyMode,
    TopologyRequest,
    Workload,
    parse_quantity,
)

from .builders import GPU, gpu_group

BLOCK = "example.com/block"
RACK = "example.com/rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
TOPOLOGY = Topology("dc", LEVELS)
FLAVOR = ResourceFlavor("h100", {"gpu": "h100"}, topology_name="dc")


def node_name(block: int, rack: int, index: int) -> str:
    return f"b{block}-r{rack}-n{index}"


def gpu_node(block: int, rack: int, index: int, gpus: int = 4, **fields: object) -> ClusterNode:
    name = node_name(block, rack, index)
    labels = {BLOCK: f"b{block}", RACK: f"b{block}-r{rack}", HOSTNAME_LABEL: name, "gpu": "h100"}
    allocatable = {GPU: parse_quantity(gpus), "cpu": parse_quantity(32), "pods": parse_quantity(110)}
    return ClusterNode(name, labels, allocatable, **fields)  # type: ignore[arg-type]


def data_centre(
    blocks: int = 2, racks: int = 2, nodes: int = 4, gpus: int = 4, quota: int = 1000, **engine: object
) -> Engine:
    """``blocks`` x ``racks`` x ``nodes`` nodes of ``gpus`` GPUs; ClusterQueue ``team`` (LocalQueue
    ``team/q``) with ``quota`` GPUs of flavor h100, preempting lower priorities."""
    eng = Engine(**engine)  # type: ignore[arg-type]
    eng.upsert_flavor(FLAVOR)
    eng.upsert_topology(TOPOLOGY)
    for b in range(blocks):
        for r in range(racks):
            for n in range(nodes):
                eng.upsert_node(gpu_node(b, r, n, gpus))
    eng.upsert_cluster_queue(
        ClusterQueue(
            "team",
            gpu_group(("h100", quota, None, None)),
            preemption=Preemption(within_cluster_queue="LowerPriority"),  # type: ignore[arg-type]
        )
    )
    eng.upsert_local_queue(LocalQueue("team", "q", "team"))
    return eng


def required(level: str = RACK, **fields: object) -> TopologyRequest:
    return TopologyRequest(TopologyMode.REQUIRED, level, **fields)  # type: ignore[arg-type]


def preferred(level: str = RACK, **fields: object) -> TopologyRequest:
    return TopologyRequest(TopologyMode.PREFERRED, level, **fields)  # type: ignore[arg-type]


def job(
    name: str,
    pods: int,
    per_pod: int = 4,
    request: TopologyRequest | None = None,
    *,
    priority: int = 0,
    created: float = 0.0,
    extra: tuple[PodSet, ...] = (),
    **workload: object,
) -> Workload:
    workers = PodSet.of("workers", pods, {GPU: per_pod}, topology_request=request)
    return Workload(
        "team",
        name,
        "q",
        (*extra, workers),
        priority=priority,
        created=created,
        **workload,  # type: ignore[arg-type]
    )


def racks_of(engine: Engine, assignment: TopologyAssignment) -> dict[str, int]:
    """Pods per rack of an assignment (nodes looked up by hostname)."""
    out: dict[str, int] = {}
    for domain in assignment.domains:
        node = next(n for n in _nodes(engine) if n.labels[HOSTNAME_LABEL] == domain.values[-1])
        rack = node.labels[RACK]
        out[rack] = out.get(rack, 0) + domain.count
    return out


def _nodes(engine: Engine) -> list[ClusterNode]:
    return list(engine._topology.capacity.nodes.values())


def pods_per_node(assignment: TopologyAssignment) -> Mapping[str, int]:
    return {d.values[-1]: d.count for d in assignment.domains}
