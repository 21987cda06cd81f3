from __future__ import annotations

import pytest

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand.podsets import PodSetDemand, Role
from rayquota.queueing import (
    PodSetAssignment,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    Toleration,
    WithinClusterQueuePolicy,
)

CLUSTER_QUEUE = {
    "apiVersion": "rayquota.io/v1alpha1",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a"},
    "spec": {
        "cohort": "research",
        "queueingStrategy": "StrictFIFO",
        "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "stopPolicy": "Hold",
        "fairSharing": {"weight": "500m"},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}],
                    }
                ],
            }
        ],
    },
}


def test_cluster_queue_fields_reach_the_engine() -> None:
    cq = converter.cluster_queue(CLUSTER_QUEUE)
    assert cq.name == "team-a" and cq.cohort == "research"
    assert cq.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert cq.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_PRIORITY
    assert cq.preemption.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY
    assert cq.stop_policy is StopPolicy.HOLD and cq.fair_sharing_weight == 0.5
    quota = cq.resource_groups[0].flavors[0].resources["nvidia.com/gpu"]
    assert (quota.nominal, quota.borrowing_limit, quota.lending_limit) == (8000, 4000, None)
    assert cq.namespace_selector is not None
    assert cq.namespace_selector.matches({"team": "a"}) and not cq.namespace_selector.matches({"team": "b"})


def test_malformed_cluster_queue_names_the_field() -> None:
    bad = {
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}]}
            ]
        },
    }
    with pytest.raises(converter.ConversionError, match=r"clusterQueue q\.resourceGroups\[0\]\.flavors\[0\]"):
        converter.cluster_queue(bad)
    with pytest.raises(converter.ConversionError, match="StrictLIFO"):
        converter.cluster_queue({"metadata": {"name": "q"}, "spec": {"queueingStrategy": "StrictLIFO"}})


def test_flavor_and_local_queue() -> None:
    flavor = converter.resource_flavor(
        {
            "metadata": {"name": "h100"},
            "spec": {
                "nodeLabels": {"pool": "h100"},
                "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            },
        }
    )
    assert flavor.node_labels == {"pool": "h100"} and flavor.node_taints[0].value == "present"
    assert flavor.tolerations == (Toleration("nvidia.com/gpu", "Exists"),)
    lq = converter.local_queue(
        {"metadata": {"name": "default", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}
    )
    assert (lq.key, lq.cluster_queue) == ("ns/default", "cq")


def test_workload_from_requests_or_template_with_priority_class() -> None:
    body = {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": "lq",
            "priorityClassName": "high",
            "podSets": [
                {"name": "a", "count": 2, "requests": {"nvidia.com/gpu": "1"}},
                {
                    "name": "b",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"resources": {"requests": {"cpu": "2"}}}],
                            "nodeSelector": {"pool": "x"},
                        }
                    },
                },
            ],
        },
    }
    wl = converter.workload(body, {"high": 1000}.get)
    assert wl.key == "ns/w" and wl.queue_name == "lq" and wl.priority == 1000 and wl.created > 0
    assert wl.totals() == {"nvidia.com/gpu": 2000, "cpu": 2000}
    assert wl.pod_sets[1].node_selector == {"pool": "x"}


def test_demand_round_trips_through_the_api_pod_set() -> None:
    demand = PodSetDemand(
        "gpu",
        Role.WORKER,
        3,
        {"nvidia.com/gpu": 2000, "memory": 2**34 * 1000},
        {"pool": "h100"},
        ({"key": "k", "operator": "Exists"},),
    )
    api = converter.api_pod_set(demand)
    assert api["requests"] == {"memory": "16Gi", "nvidia.com/gpu": "2"}
    back = converter.workload(
        {"metadata": {"name": "w", "namespace": "n"}, "spec": {"podSets": [api]}}
    ).pod_sets[0]
    assert back == converter.engine_pod_set(demand)


def test_admission_round_trips() -> None:
    pod_sets = (PodSetAssignment("gpu", 2, {"nvidia.com/gpu": "h100"}, {"nvidia.com/gpu": 4000}),)
    api = converter.admission_to_api("team-a", pod_sets)
    assert api["podSetAssignments"][0]["resourceUsage"] == {"nvidia.com/gpu": "4"}
    assert converter.admission_from_api(api) == ("team-a", pod_sets)


def test_equal_pod_sets_convert_to_one_object() -> None:
    """50,000 Workloads of three shapes need three PodSets in the engine, not 50,000."""
    from rayquota.operator.queue.admission import converter

    def body(name: str) -> dict[str, object]:
        pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}  # fmt: skip
        return {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [pod_set]},
        }

    first, second = converter.workload(body("a")), converter.workload(body("b"))
    assert first.pod_sets[0] is second.pod_sets[0]
    assert first.pod_sets[0].requests == {"cpu": 1000}
