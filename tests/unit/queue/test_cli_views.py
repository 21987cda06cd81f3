from __future__ import annotations

from typing import Any

from rayquota import cli_views
from rayquota.cli_views import QueueState


def gpu_queue(name: str, gpus: int, usage: int = 0, cohort: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                ],
            }
        ]
    }
    if cohort:
        spec["cohort"] = cohort
    status = {
        "pendingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsUsage": [
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": str(usage), "borrowed": "0"}]}
        ],
    }
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def job_workload(name: str, gpus: int, created: str, admitted: bool, priority: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": f"rayjob-{name}-abcde",
            "namespace": "ns",
            "creationTimestamp": created,
            "labels": {"rayquota.io/owner-kind": "rayjob", "rayquota.io/owner-name": name},
            "ownerReferences": [{"kind": "RayJob", "name": name}],
        },
        "spec": {
            "queueName": "team",
            "priority": priority,
            "podSets": [{"name": "gpu", "count": 1, "requests": {"nvidia.com/gpu": str(gpus)}}],
        },
        "status": {},
    }
    if admitted:
        body["status"]["admission"] = {
            "clusterQueue": "team",
            "podSetAssignments": [
                {
                    "name": "gpu",
                    "count": 1,
                    "flavors": {"nvidia.com/gpu": "a100"},
                    "resourceUsage": {"nvidia.com/gpu": str(gpus)},
                }
            ],
        }
        body["status"]["conditions"] = [{"type": "Admitted", "status": "True"}]
    return body


def state() -> QueueState:
    return QueueState(
        flavors=[{"metadata": {"name": "a100"}, "spec": {}}],
        cluster_queues=[gpu_queue("team", 8, usage=8)],
        local_queues=[{"metadata": {"name": "team", "namespace": "ns"}, "spec": {"clusterQueue": "team"}}],
        workloads=[
            job_workload("first", 8, "2026-01-01T00:00:00Z", admitted=True),
            job_workload("second", 8, "2026-01-01T00:01:00Z", admitted=False),
            job_workload("third", 4, "2026-01-01T00:02:00Z", admitted=False),
        ],
    )


def test_queues_table_shows_usage_over_quota() -> None:
    text = cli_views.queues_table(state())
    assert "team" in text and "a100/nvidia.com/gpu 8/8" in text


def test_workloads_table_shows_status_and_owner() -> None:
    lines = cli_views.workloads_table(state()).splitlines()
    first = next(line for line in lines if "rayjob/first" in line)
    second = next(line for line in lines if "rayjob/second" in line)
    assert "Admitted" in first and "Pending" in second


def test_explain_says_what_it_needs_what_is_free_and_who_is_ahead() -> None:
    text = cli_views.explain(state(), "rayjob", "third", "ns")
    assert "nvidia.com/gpu 4" in text
    assert "a100/nvidia.com/gpu 0" in text  # nothing free
    assert "queue position: 2" in text and "rayjob-second" in text
    assert "holding quota in this ClusterQueue: ns/rayjob-first-abcde" in text
    assert "why it waits:" in text and "0 of 8 free" in text


def test_explain_an_object_that_is_not_queued() -> None:
    assert "has no Workload" in cli_views.explain(state(), "rayjob", "nope", "ns")


def test_rebuild_keeps_a_grown_demand_waiting_as_a_scale_up_slice() -> None:
    """An admitted Workload whose demand grew (a RayService upgrade's second cluster) is pending
    in the rebuilt engine too, with the engine's sentence, while its admission stays counted."""
    queue_state = state()
    grown = job_workload("first", 8, "2026-01-01T00:00:00Z", admitted=True)
    grown["spec"]["podSets"][0]["count"] = 2  # the admission covers 1 pod of 8 GPUs
    queue_state.workloads = [grown]
    driver = cli_views.rebuild(queue_state)
    driver.cycle(0.0)
    key = "ns/rayjob-first-abcde"
    assert driver.admission(key) is not None
    assert "0 of 8 free" in str(driver.pending_reason(key))
    assert driver.engine.cluster_queue_status("team").usage == {("a100", "nvidia.com/gpu"): 8000}


def service_workload() -> dict[str, Any]:
    """An admitted RayService (2 GPUs) whose upgrade asks for 2 more GPUs in a new shape."""
    body = job_workload("greeter", 2, "2026-01-01T00:00:00Z", admitted=True)
    body["metadata"]["labels"] = {"rayquota.io/owner-kind": "rayservice", "rayquota.io/owner-name": "greeter"}
    body["metadata"]["annotations"] = {
        "rayquota.io/pod-set-names": (
            '{"gpu":"worker group `gpu` of cluster `greeter-old`",'
            '"gpu-50baf":"worker group `gpu` of cluster `greeter-new`"}'
        )
    }
    body["spec"]["podSets"].append({"name": "gpu-50baf", "count": 1, "requests": {"nvidia.com/gpu": "2"}})
    return body


def test_explain_an_admitted_upgrade_that_waits() -> None:
    full = QueueState(
        flavors=[{"metadata": {"name": "a100"}, "spec": {}}],
        cluster_queues=[gpu_queue("team", 8, usage=8)],
        local_queues=[{"metadata": {"name": "team", "namespace": "ns"}, "spec": {"clusterQueue": "team"}}],
        workloads=[service_workload(), job_workload("first", 6, "2026-01-01T00:00:01Z", admitted=True)],
    )
    text = cli_views.explain(full, "rayservice", "greeter", "ns")
    assert "Admitted" in text.splitlines()[0]
    (waits,) = [line for line in text.splitlines() if "waits" in line]
    assert "upgrade" in waits and "0 of 8 free" in waits
    assert "worker group `gpu` of cluster `greeter-new`" in waits and "gpu-50baf" not in waits
    assert "The workload is admitted" not in text


def _node(name: str, rack: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"example.com/rack": rack, "kubernetes.io/hostname": name, "pool": "a100"},
        },
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_explain_says_how_much_room_each_rack_has() -> None:
    waiting = job_workload("big", 8, "2026-01-01T00:00:00Z", admitted=False)
    waiting["spec"]["podSets"][0]["count"] = 2
    waiting["spec"]["podSets"][0]["requests"] = {"nvidia.com/gpu": "4"}
    waiting["spec"]["podSets"][0]["topologyRequest"] = {"required": "example.com/rack"}
    other_pod = {
        "metadata": {"name": "daemon", "namespace": "kube-system"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}],
        },
        "status": {"phase": "Running"},
    }
    state = QueueState(
        flavors=[
            {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {"pool": "a100"}, "topologyName": "dc"}}
        ],
        cluster_queues=[gpu_queue("team", 16)],
        local_queues=[{"metadata": {"name": "team", "namespace": "ns"}, "spec": {"clusterQueue": "team"}}],
        workloads=[waiting],
        topologies=[
            {
                "metadata": {"name": "dc"},
                "spec": {
                    "levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
                },
            }
        ],
        nodes=[_node("n1", "r1", 4), _node("n2", "r1", 2), _node("n3", "r2", 4)],
        pods=[other_pod],
    )
    text = cli_views.explain(state, "rayjob", "big", "ns")
    assert "room per rack in flavor a100 (nvidia.com/gpu free/allocatable): r1 4/6, r2 4/4" in text
    assert "needs 8 nvidia.com/gpu (2 pods) in one rack; the rack with the most room" in text


def test_a_queue_naming_a_missing_flavor_shows_inactive_and_explain_offers_no_quota_of_it() -> None:
    queue_state = state()
    queue_state.flavors = []  # the queue's a100 does not exist
    queue_state.cluster_queues[0]["status"]["conditions"] = [
        {
            "type": "Active",
            "status": "False",
            "reason": "FlavorNotFound",
            "message": "Can't admit new workloads: ResourceFlavor a100 not found",
        }
    ]
    assert "False (FlavorNotFound)" in cli_views.queues_table(queue_state)
    text = cli_views.explain(queue_state, "rayjob", "third", "ns")
    assert "the ClusterQueue is inactive (FlavorNotFound): " in text
    assert "free now: a100 (no such ResourceFlavor)" in text
    assert "a100/nvidia.com/gpu" not in text.split("free now:")[1].splitlines()[0]


def test_a_workload_beyond_the_maximum_capacity_is_inadmissible() -> None:
    queue_state = state()
    queue_state.workloads = [job_workload("huge", 16, "2026-01-01T00:03:00Z", admitted=False)]
    text = cli_views.explain(queue_state, "rayjob", "huge", "ns")
    assert "can never be admitted: insufficient quota for nvidia.com/gpu in flavor a100" in text
    assert "request > maximum capacity (16 > 8)" in text
    queue_state.workloads[0]["status"]["pendingReason"] = (
        "can never be admitted: insufficient quota for nvidia.com/gpu in flavor a100, ..."
    )
    [row] = [line for line in cli_views.workloads_table(queue_state).splitlines() if "rayjob/huge" in line]
    assert "Inadmissible" in row
    assert "Inadmissible" in cli_views.explain(queue_state, "rayjob", "huge", "ns").splitlines()[0]


def cluster_workload(asked: int, admitted: int) -> dict[str, Any]:
    """An admitted RayCluster's Workload whose autoscaler raised worker group `gpu-workers` from
    ``admitted`` to ``asked`` pods of 1 GPU (its only pod set: the engine's sentence names none)."""
    body = job_workload("rc", admitted, "2026-01-01T00:00:00Z", admitted=True)
    body["metadata"]["labels"] = {"rayquota.io/owner-kind": "raycluster", "rayquota.io/owner-name": "rc"}
    body["metadata"]["annotations"] = {
        "rayquota.io/pod-set-names": '{"gpu":"worker group `gpu-workers` of cluster `rc`"}'
    }
    body["spec"]["podSets"][0].update(count=asked, requests={"nvidia.com/gpu": "1"})
    body["status"]["admission"]["podSetAssignments"][0]["count"] = admitted
    return body


def test_explain_an_autoscaler_scale_up_that_waits_names_the_group_and_what_it_lacks() -> None:
    full = QueueState(
        flavors=[{"metadata": {"name": "a100"}, "spec": {}}],
        cluster_queues=[gpu_queue("team", 2, usage=2)],
        local_queues=[{"metadata": {"name": "team", "namespace": "ns"}, "spec": {"clusterQueue": "team"}}],
        workloads=[
            cluster_workload(asked=2, admitted=1),
            job_workload("first", 1, "2026-01-01T00:00:01Z", True),
        ],
    )
    lines = cli_views.explain(full, "raycluster", "rc", "ns").splitlines()
    (waits,) = [line for line in lines if "waits" in line]
    assert "a scale-up" in waits and "upgrade" not in waits and "1 more nvidia.com/gpu" in waits
    grown = lines[lines.index(waits) + 1]
    assert (
        grown.strip()
        == "worker group `gpu-workers` of cluster `rc`: 2 pods asked, 1 admitted: 1 more nvidia.com/gpu"
    )


def test_explain_a_scale_up_that_fits_says_nothing_waits() -> None:
    free = QueueState(
        flavors=[{"metadata": {"name": "a100"}, "spec": {}}],
        cluster_queues=[gpu_queue("team", 2, usage=1)],
        local_queues=[{"metadata": {"name": "team", "namespace": "ns"}, "spec": {"clusterQueue": "team"}}],
        workloads=[cluster_workload(asked=2, admitted=1)],
    )
    text = cli_views.explain(free, "raycluster", "rc", "ns")
    assert "waits" not in text and "pods asked" not in text
