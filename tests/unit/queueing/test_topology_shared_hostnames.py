"""Nodes whose ``kubernetes.io/hostname`` label values repeat across racks (Kueue's own TAS
benchmark labels the nodes of every rack ``node-0`` .. ``node-63``).

An assignment in Kueue's shape names only the hostname value, so the room it takes is charged
to that value. As Kueue's TAS cache does, the nodes sharing a value are one leaf whose room is
theirs summed: never more pods than that sum (a node whose count of pods that fit was not
brought up to date once took pods without end), and not fewer either (keeping the twins within
one node's room cut the TAS benchmark's usage below Kueue's floor).
"""

from __future__ import annotations

from rayquota.queueing import HOSTNAME_LABEL, Admit, ClusterNode, Engine, parse_quantity
from rayquota.queueing.topology.capacity import NodeFilter, TopologyCapacity

from .builders import GPU
from .topology_builders import BLOCK, FLAVOR, RACK, TOPOLOGY, data_centre, job, required


def twin_node(rack: int) -> ClusterNode:
    """A 4-GPU node in rack ``rack`` of block b0, labelled hostname ``n0`` like its twin."""
    labels = {BLOCK: "b0", RACK: f"b0-r{rack}", HOSTNAME_LABEL: "n0", "gpu": "h100"}
    allocatable = {GPU: parse_quantity(4), "cpu": parse_quantity(32), "pods": parse_quantity(110)}
    return ClusterNode(f"b0-r{rack}-n0", labels, allocatable)


def admitted_pods(engine: Engine, cycles: int) -> int:
    pods = 0
    for cycle in range(cycles):
        for decision in engine.run_cycle(float(cycle)):
            if isinstance(decision, Admit):
                pods += sum(ps.count for ps in decision.pod_sets)
    return pods


def test_a_charge_to_a_shared_hostname_reaches_every_node_that_carries_it() -> None:
    engine = data_centre(blocks=0)
    engine.upsert_node(twin_node(0))
    engine.upsert_node(twin_node(1))
    for i in range(6):
        engine.add_workload(job(f"w{i}", 1, request=required(), created=float(i)))
    # Two nodes of 4 GPUs: two 4-GPU pods, wherever the hostname leads them, and no more.
    assert admitted_pods(engine, 6) == 2


def test_freeing_a_shared_hostname_gives_the_room_back() -> None:
    engine = data_centre(blocks=0)
    engine.upsert_node(twin_node(0))
    engine.upsert_node(twin_node(1))
    engine.add_workload(job("first", 1, request=required(), created=0.0))
    assert admitted_pods(engine, 1) == 1
    engine.finish_workload("team/first")
    engine.add_workload(job("second", 1, request=required(), created=1.0))
    assert admitted_pods(engine, 1) == 1


def test_shared_hostname_nodes_pool_their_room_in_the_first_rack() -> None:
    capacity = TopologyCapacity()
    capacity.upsert_topology(TOPOLOGY)
    for rack in (1, 0):
        capacity.upsert_node(twin_node(rack))
    view = capacity.flavor_topology(FLAVOR)
    assert view is not None
    assert list(view.leaves) == [("b0", "b0-r0", "n0")]
    assert sorted(n.name for n in view.leaves[("b0", "b0-r0", "n0")]) == ["b0-r0-n0", "b0-r1-n0"]
    free = capacity.leaf_free(view, ("b0", "b0-r0", "n0"), NodeFilter())
    assert free[GPU] == 2 * parse_quantity(4)
