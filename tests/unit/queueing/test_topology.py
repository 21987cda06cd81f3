"""Topology-aware admission, by example: required, preferred, slices, groups, preemption,
room freed by pods and nodes, and the assignment kept across restarts and scale-ups."""

from __future__ import annotations

from rayquota.queueing import (
    HOSTNAME_LABEL,
    Admit,
    Engine,
    Pending,
    PodSet,
    PodSetAssignment,
    Preempt,
    Taint,
    TopologyAssignment,
    TopologyDomain,
    TopologyMode,
    TopologyRequest,
    parse_quantity,
)

from .builders import GPU
from .topology_builders import (
    BLOCK,
    RACK,
    data_centre,
    gpu_node,
    job,
    node_name,
    pods_per_node,
    preferred,
    racks_of,
    required,
)


def admitted(decisions: list[object], key: str) -> Admit:
    return next(d for d in decisions if isinstance(d, Admit) and d.workload == key)


def pending_reason(decisions: list[object], key: str) -> str:
    return next(d.reason for d in decisions if isinstance(d, Pending) and d.workload == key)


def fill(engine: Engine, rack_free: dict[tuple[int, int], int], nodes: int = 4, gpus: int = 4) -> None:
    """External pods take GPUs so that rack (block, rack) keeps ``rack_free`` GPUs free."""
    for (b, r), free in rack_free.items():
        take = nodes * gpus - free
        for n in range(nodes):
            used = min(gpus, take)
            take -= used
            if used:
                engine.upsert_pod(f"other/{b}-{r}-{n}", node_name(b, r, n), {GPU: parse_quantity(used)})


def topology_of(decision: Admit, pod_set: str = "workers") -> TopologyAssignment:
    assignment = next(ps for ps in decision.pod_sets if ps.name == pod_set).topology
    assert assignment is not None
    return assignment


# ---------------------------------------------------------------------- required


def test_required_rack_lands_in_one_rack_in_kueues_shape() -> None:
    engine = data_centre()
    engine.add_workload(job("train", 4, request=required()))
    decision = admitted(engine.run_cycle(), "team/train")
    assignment = topology_of(decision)
    assert assignment.levels == (HOSTNAME_LABEL,)  # the topology ends at nodes: only the node is named
    assert assignment.count == 4
    assert len(racks_of(engine, assignment)) == 1
    assert all(d.count == 1 for d in assignment.domains)  # 4 GPUs per node, 4 GPUs per pod


def test_required_rack_waits_with_the_sentence_when_no_rack_has_room() -> None:
    engine = data_centre()
    fill(engine, {(0, 0): 12, (0, 1): 8, (1, 0): 4, (1, 1): 0})
    engine.add_workload(job("train", 4, request=required()))
    decisions = engine.run_cycle()
    assert not any(isinstance(d, Admit) for d in decisions)
    assert pending_reason(decisions, "team/train") == (
        "pod set workers needs 16 nvidia.com/gpu (4 pods) in one rack; the rack with the most room, "
        "b0-r0, has 12 nvidia.com/gpu free (fits 3 of the pods)"
    )


def test_a_waiting_workload_is_admitted_once_an_external_pod_frees_its_rack() -> None:
    engine = data_centre()
    fill(engine, {(0, 0): 12, (0, 1): 8, (1, 0): 4, (1, 1): 0})
    engine.add_workload(job("train", 4, request=required()))
    engine.run_cycle()
    assert not any(isinstance(d, Admit) for d in engine.run_cycle())  # parked, nothing changed
    engine.delete_pod("other/0-0-0")  # the first node of rack b0-r0 holds 4 GPUs of the others
    decision = admitted(engine.run_cycle(), "team/train")
    assert racks_of(engine, topology_of(decision)) == {"b0-r0": 4}


def test_the_tightest_rack_that_fits_is_chosen() -> None:
    engine = data_centre()
    fill(engine, {(0, 0): 16, (0, 1): 8, (1, 0): 12, (1, 1): 4})
    engine.add_workload(job("train", 2, request=required()))
    assert racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/train"))) == {"b0-r1": 2}


def test_two_admissions_in_one_cycle_never_take_the_same_room() -> None:
    engine = data_centre(blocks=1, racks=2)
    engine.add_workload(job("a", 4, request=required(), created=1))
    engine.add_workload(job("b", 4, request=required(), created=2))
    engine.add_workload(job("c", 4, request=required(), created=3))
    decisions = engine.run_cycle()
    a = racks_of(engine, topology_of(admitted(decisions, "team/a")))
    b = racks_of(engine, topology_of(admitted(decisions, "team/b")))
    assert set(a) != set(b)
    assert "one rack" in pending_reason(decisions, "team/c")


def test_unready_unschedulable_and_tainted_nodes_offer_no_room() -> None:
    engine = data_centre(blocks=1, racks=1)
    engine.upsert_node(gpu_node(0, 0, 0, ready=False))
    engine.upsert_node(gpu_node(0, 0, 1, unschedulable=True))
    engine.upsert_node(gpu_node(0, 0, 2, taints=(Taint("maintenance", "yes", "NoSchedule"),)))
    engine.add_workload(job("train", 2, request=required()))
    decisions = engine.run_cycle()
    assert "fits 1 of the pods" in pending_reason(decisions, "team/train")
    engine.upsert_node(gpu_node(0, 0, 0))  # ready again
    assert pods_per_node(topology_of(admitted(engine.run_cycle(), "team/train"))) == {
        node_name(0, 0, 0): 1,
        node_name(0, 0, 3): 1,
    }


def test_a_level_the_topology_lacks_is_refused_by_name() -> None:
    engine = data_centre()
    engine.add_workload(job("train", 1, request=required("example.com/row")))
    reason = pending_reason(engine.run_cycle(), "team/train")
    assert reason == "topology dc of flavor h100 has no level example.com/row"


# ---------------------------------------------------------------------- preferred, unconstrained


def test_preferred_falls_back_to_the_block_then_spreads() -> None:
    engine = data_centre()
    fill(engine, {(0, 0): 8, (0, 1): 8, (1, 0): 4, (1, 1): 4})
    engine.add_workload(job("in-block", 4, request=preferred()))
    assert racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/in-block"))) == {
        "b0-r0": 2,
        "b0-r1": 2,
    }
    engine.add_workload(job("spread", 2, request=preferred()))
    assert racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/spread"))) == {
        "b1-r0": 1,
        "b1-r1": 1,
    }


def test_without_an_annotation_pods_on_a_topology_flavor_are_still_placed() -> None:
    engine = data_centre(blocks=1, racks=1, nodes=2)
    engine.add_workload(job("a", 1, per_pod=3))
    engine.add_workload(job("b", 2, per_pod=3))  # the quota has room, the nodes have 2 x 1 left
    decisions = engine.run_cycle()
    assert topology_of(admitted(decisions, "team/a")).count == 1
    assert "on the nodes of flavor h100" in pending_reason(decisions, "team/b")


# ---------------------------------------------------------------------- slices and groups


def test_slices_each_stay_in_one_rack() -> None:
    engine = data_centre()
    fill(engine, {(0, 0): 8, (0, 1): 4, (1, 0): 8, (1, 1): 4})
    request = TopologyRequest(TopologyMode.UNCONSTRAINED, slice_level=RACK, slice_size=2)
    engine.add_workload(job("sliced", 4, request=request))
    per_rack = racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/sliced")))
    assert all(n % 2 == 0 for n in per_rack.values())
    assert sum(per_rack.values()) == 4


def test_head_and_workers_of_one_group_share_a_rack() -> None:
    engine = data_centre()
    # Rack b0-r0 fits the 4 workers but not also the head's GPU; rack b1-r1 fits both.
    fill(engine, {(0, 0): 16, (0, 1): 0, (1, 0): 0, (1, 1): 20 - 4})
    engine.upsert_node(gpu_node(1, 1, 3, gpus=8))
    head = PodSet.of("head", 1, {GPU: 4}, topology_request=required(group="ray"))
    engine.add_workload(job("grouped", 4, request=required(group="ray"), extra=(head,)))
    decision = admitted(engine.run_cycle(), "team/grouped")
    assert racks_of(engine, topology_of(decision, "head")) == {"b1-r1": 1}
    assert racks_of(engine, topology_of(decision, "workers")) == {"b1-r1": 4}


def test_a_group_that_fits_no_rack_together_waits() -> None:
    engine = data_centre(blocks=1, racks=2)
    fill(engine, {(0, 0): 16, (0, 1): 4})
    head = PodSet.of("head", 1, {GPU: 4}, topology_request=required(group="ray"))
    engine.add_workload(job("grouped", 4, request=required(group="ray"), extra=(head,)))
    reason = pending_reason(engine.run_cycle(), "team/grouped")
    assert reason.startswith("pod set head and pod set workers must share one rack; no rack has room")
    assert "(pod set workers needs 16 nvidia.com/gpu (4 pods); the rack with the most room, b0-r0" in reason


# ---------------------------------------------------------------------- preemption


def test_preemption_frees_the_rack_that_would_then_fit() -> None:
    engine = data_centre(blocks=1, racks=2)
    # Low-priority jobs: two in rack r0 (8 GPUs each), one in r1 taking 12 GPUs.
    engine.add_workload(job("low-a", 2, request=required(), priority=1, created=1))
    engine.add_workload(job("low-b", 2, request=required(), priority=1, created=2))
    engine.add_workload(job("low-c", 3, request=required(), priority=1, created=3))
    first = engine.run_cycle()
    racks = {
        k: racks_of(engine, topology_of(admitted(first, f"team/{k}"))) for k in ("low-a", "low-b", "low-c")
    }
    lone = next(k for k, r in racks.items() if list(r.values()) == [3])
    # 12 GPUs in one rack: evicting the lone 12-GPU job's rack (1 victim) beats the other (2).
    engine.add_workload(job("high", 3, request=required(), priority=10, created=4))
    decisions = engine.run_cycle()
    preempt = next(d for d in decisions if isinstance(d, Preempt))
    assert preempt.victims == (f"team/{lone}",)
    assert not any(isinstance(d, Admit) for d in decisions)
    engine.release(f"team/{lone}")
    high = admitted(engine.run_cycle(), "team/high")
    assert racks_of(engine, topology_of(high)) == racks[lone]


# ---------------------------------------------------------------------- restart, slices, backoff


def test_a_restored_assignment_holds_its_room_even_before_the_nodes_are_known() -> None:
    engine = data_centre(blocks=1, racks=1, nodes=0)  # at start-up, the nodes may come last
    nodes = tuple(TopologyDomain((node_name(0, 0, n),), 1) for n in range(4))
    restored = PodSetAssignment(
        "workers", 4, {GPU: "h100"}, {GPU: parse_quantity(16)}, TopologyAssignment((HOSTNAME_LABEL,), nodes)
    )
    engine.restore_admission(job("running", 4, request=required()), "team", [restored])
    for n in range(4):
        engine.upsert_node(gpu_node(0, 0, n))
    engine.add_workload(job("next", 1, request=required()))
    assert "the rack with the most room, b0-r0, has 0 nvidia.com/gpu free" in pending_reason(
        engine.run_cycle(), "team/next"
    )


def test_a_scale_up_keeps_its_pods_and_grows_in_the_same_rack() -> None:
    engine = data_centre()
    engine.add_workload(job("svc", 2, request=required()))
    old = racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/svc")))
    engine.add_workload(job("svc-2", 4, request=required(), replaces="team/svc"))
    decision = admitted(engine.run_cycle(), "team/svc-2")
    assert decision.replaces == "team/svc"
    assert racks_of(engine, topology_of(decision)) == {next(iter(old)): 4}


def test_a_workload_in_requeue_backoff_waits_until_its_time() -> None:
    engine = data_centre()
    engine.add_workload(job("retry", 1, request=required(), requeue_at=100.0))
    assert "requeue backoff" in pending_reason(engine.run_cycle(now=10.0), "team/retry")
    assert engine.next_requeue_at() == 100.0
    assert not any(isinstance(d, Admit) for d in engine.run_cycle(now=99.0))
    admitted(engine.run_cycle(now=100.0), "team/retry")
    assert engine.next_requeue_at() is None


def test_the_block_level_holds_a_job_that_needs_more_than_a_rack() -> None:
    engine = data_centre()
    engine.add_workload(job("big", 6, request=required(BLOCK)))
    per_rack = racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/big")))
    assert len({rack.split("-")[0] for rack in per_rack}) == 1
    assert sum(per_rack.values()) == 6


def test_a_placed_workloads_own_pods_are_not_counted_twice() -> None:
    engine = data_centre(blocks=1, racks=1, nodes=1, gpus=8)
    engine.add_workload(job("a", 1, request=required(), pod_owner="team/a-object"))
    placed = topology_of(admitted(engine.run_cycle(), "team/a"))
    assert pods_per_node(placed) == {node_name(0, 0, 0): 1}
    engine.upsert_pod("team/a-worker-0", node_name(0, 0, 0), {GPU: parse_quantity(4)}, "team/a-object")
    engine.add_workload(job("b", 1, request=required()))  # the node's other 4 GPUs
    assert racks_of(engine, topology_of(admitted(engine.run_cycle(), "team/b"))) == {"b0-r0": 1}


def test_pods_of_a_workload_without_placement_count_as_other_pods() -> None:
    engine = data_centre(blocks=1, racks=1)
    engine.upsert_pod("elsewhere/x", node_name(0, 0, 0), {GPU: parse_quantity(4)}, "team/never-placed")
    engine.add_workload(job("b", 4, request=required()))
    assert "fits 3 of the pods" in pending_reason(engine.run_cycle(), "team/b")
