"""Nodes whose ``kubernetes.io/hostname`` label values repeat across racks (Kueue's own TAS
benchmark labels the nodes of every rack ``node-0`` .. ``node-63``).

An assignment in Kueue's shape names only the hostname value, so the room it takes is charged
to that value. Every node carrying the value must see that charge: a node whose count of pods
that fit was not brought up to date took pods without end (the TAS benchmark's placement check
saw it as a node over its pod slots).
"""

from __future__ import annotations

from rayquota.queueing import HOSTNAME_LABEL, Admit, ClusterNode, Engine, parse_quantity

from .builders import GPU
from .topology_builders import BLOCK, RACK, data_centre, job, required


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
    # Two nodes of 4 GPUs: at most two 4-GPU pods, wherever the hostname leads them.
    assert admitted_pods(engine, 6) <= 2


def test_freeing_a_shared_hostname_gives_the_room_back() -> None:
    engine = data_centre(blocks=0)
    engine.upsert_node(twin_node(0))
    engine.upsert_node(twin_node(1))
    engine.add_workload(job("first", 1, request=required(), created=0.0))
    assert admitted_pods(engine, 1) == 1
    engine.finish_workload("team/first")
    engine.add_workload(job("second", 1, request=required(), created=1.0))
    assert admitted_pods(engine, 1) == 1
