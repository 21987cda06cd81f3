"""Kueue v1beta2 bodies reach the engine as rayquota.io ones do, and what we write is in Kueue's shape."""

from __future__ import annotations

import pytest

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand.podsets import PodSetDemand, Role
from rayquota.operator.queue.kueue import api_group, kueue_shapes


def test_renamed_kueue_fields_reach_the_engine() -> None:
    cq = converter.cluster_queue(
        {
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": "research",
                "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": "rf",
                                "resources": [{"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}],
                            }
                        ],
                    }
                ],
            },
        }
    )
    assert cq.cohort == "research"
    assert (cq.flavor_fungibility.when_can_borrow, cq.flavor_fungibility.when_can_preempt) == (
        "Borrow",
        "TryNextFlavor",
    )
    assert converter.cohort({"metadata": {"name": "c"}, "spec": {"parentName": "root"}}).parent == "root"
    wl = converter.workload(
        {
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {
                "queueName": "lq",
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "high",
                },
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "5"}}}]}
                        },
                    }
                ],
            },
        },
        {"high": 200}.get,
    )
    assert wl.priority == 200 and wl.totals() == {"cpu": 5000}


def test_an_explicit_priority_wins_over_the_class() -> None:
    spec = {"priority": 50, "priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "high"}}
    assert kueue_shapes.rayquota_spec(spec) == {"priority": 50, "priorityClassName": "high"}
    # A pod PriorityClass is carried as such (never read as a WorkloadPriorityClass of that name).
    pod_priority = {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "x"}}
    assert kueue_shapes.rayquota_spec(pod_priority) == {
        "priorityClassName": "x",
        "priorityClassSource": "scheduling.k8s.io/priorityclass",
    }
    wl = converter.workload({"metadata": {"namespace": "n", "name": "w"}, "spec": pod_priority}, {"x": 9}.get)
    assert wl.priority == 0


def test_workload_spec_written_in_kueue_shape_reads_back_the_same() -> None:
    demand = PodSetDemand("gpu", Role.WORKER, 3, {"nvidia.com/gpu": 2000, "cpu": 4000}, {"pool": "h100"}, ())
    spec = {
        "queueName": "lq",
        "podSets": [converter.api_pod_set(demand)],
        "priority": 7,
        "priorityClassName": "p",
        "active": True,
    }
    kueue_spec = kueue_shapes.workload_spec_to_kueue(spec)
    pod_set = kueue_spec["podSets"][0]
    assert "requests" not in pod_set and pod_set["count"] == 3
    assert pod_set["template"]["spec"]["containers"] == [
        {"name": "main", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}}}
    ]
    assert pod_set["template"]["spec"]["nodeSelector"] == {"pool": "h100"}
    assert kueue_spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "p",
    }
    back = converter.workload({"metadata": {"name": "w", "namespace": "n"}, "spec": kueue_spec})
    assert back.pod_sets == (converter.engine_pod_set(demand),) and back.priority == 7


def test_workload_status_in_kueue_shape() -> None:
    evicted = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": []},
        "pendingReason": "words",
        "conditions": [
            {"type": "Admitted", "status": "False", "reason": "Pending", "message": "m"},
            {"type": "Evicted", "status": "True", "reason": "InClusterQueue", "message": "m"},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": "m"},
        ],
    }
    out = kueue_shapes.workload_status_to_kueue(evicted)
    assert "pendingReason" not in out and out["admission"] == evicted["admission"]
    reasons = {c["type"]: c["reason"] for c in out["conditions"]}
    assert reasons == {"Admitted": "NoReservation", "Evicted": "Preempted", "Preempted": "InClusterQueue"}


def test_local_queue_usage_key_is_renamed() -> None:
    usage = [{"name": "rf", "resources": [{"name": "cpu", "total": "1"}]}]
    out = kueue_shapes.local_queue_status_to_kueue({"pendingWorkloads": 0, "flavorUsage": usage})
    assert out == {"pendingWorkloads": 0, "flavorsUsage": usage}


def test_queue_api_modes() -> None:
    assert api_group.of_mode("rayquota") is api_group.RAYQUOTA
    kueue = api_group.of_mode("kueue")
    assert kueue.workloads.api_version == "kueue.x-k8s.io/v1beta2" and kueue.workloads.namespaced
    assert not kueue.cluster_queues.namespaced and kueue.workload_status_manager == "kueue-admission"
    with pytest.raises(ValueError, match="RAYQUOTA_QUEUE_API"):
        api_group.of_mode("volcano")


def test_min_count_is_written_in_both_shapes_and_reaches_the_engine() -> None:
    demand = PodSetDemand("main", Role.MAIN, 20, {"cpu": 1000}, min_count=5)
    api = converter.api_pod_set(demand)
    assert api["minCount"] == 5
    kueue_spec = kueue_shapes.workload_spec_to_kueue({"queueName": "lq", "podSets": [api]})
    assert kueue_spec["podSets"][0]["minCount"] == 5
    for spec in ({"queueName": "lq", "podSets": [api]}, kueue_spec):
        back = converter.workload({"metadata": {"name": "w", "namespace": "n"}, "spec": spec})
        assert back.pod_sets[0].count == 20 and back.pod_sets[0].min_count == 5
