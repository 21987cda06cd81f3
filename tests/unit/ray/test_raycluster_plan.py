from __future__ import annotations

from typing import Any

from rayquota.operator.core.gate import QueueCondition
from rayquota.operator.ray.builders.hashing import spec_hash
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.raycluster.plan import (
    ClusterPlan,
    desired_pods,
    plan_cluster,
    validate_cluster,
)
from rayquota.operator.ray.raycluster.status import cluster_status
from rayquota.operator.ray.vocabulary import conditions, labels
from tests.unit.ray.fixtures import cluster

VERSION = "1.0.0"
NOW = "2026-01-01T00:00:00Z"


def pod(
    name: str,
    node_type: str,
    group: str = "headgroup",
    *,
    phase: str = "Running",
    ready: bool = True,
    spec: dict | None = None,
    version: str = VERSION,
    created: str = "2026-01-01T00:00:00Z",
    terminating: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "creationTimestamp": created,
        "labels": labels.pod_labels("demo", node_type, group),
        "annotations": {
            labels.HASH_ANNOTATION: spec_hash((spec or cluster())["spec"]),
            labels.OPERATOR_VERSION_ANNOTATION: version,
        },
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def full_cluster_pods(body: dict | None = None) -> list[dict[str, Any]]:
    return [
        pod("demo-head-aaaaa", "head", spec=body),
        pod("w1", "worker", "gpu", spec=body, created="2026-01-01T00:00:01Z"),
        pod("w2", "worker", "gpu", spec=body, created="2026-01-01T00:00:02Z"),
    ]


def deleted_names(plan: ClusterPlan) -> set[str]:
    return {d.pod["metadata"]["name"] for d in plan.delete}


def test_desired_is_clamped_and_multiplied_by_hosts() -> None:
    assert desired_pods({"replicas": 10, "minReplicas": 1, "maxReplicas": 3}) == 3
    assert desired_pods({"replicas": 0, "minReplicas": 2, "maxReplicas": 3, "numOfHosts": 2}) == 4
    assert desired_pods({"minReplicas": 1, "maxReplicas": 3}) == 1
    assert desired_pods({"replicas": 2, "suspend": True}) == 0


def test_empty_cluster_creates_head_and_workers() -> None:
    plan = plan_cluster(cluster(), [], VERSION)
    kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in plan.create)
    assert kinds == ["head", "worker", "worker"]
    assert not plan.delete


def test_complete_cluster_is_left_alone() -> None:
    plan = plan_cluster(cluster(), full_cluster_pods(), VERSION)
    assert not plan.create and not plan.delete and not plan.restamp


def test_missing_head_is_recreated_and_failed_worker_replaced() -> None:
    pods = full_cluster_pods()[1:]
    pods[0]["status"]["phase"] = "Failed"
    plan = plan_cluster(cluster(), pods, VERSION)
    assert deleted_names(plan) == {"w1"}
    kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in plan.create)
    assert kinds == ["head", "worker"]


def test_scale_down_removes_unready_then_newest() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    pods = full_cluster_pods()
    plan = plan_cluster(body, pods, VERSION)
    assert deleted_names(plan) == {"w2"}  # the newest
    pods[1]["status"]["conditions"][0]["status"] = "False"
    assert deleted_names(plan_cluster(body, pods, VERSION)) == {"w1"}  # the unready one


def test_workers_to_delete_honoured_and_left_as_written() -> None:
    body = cluster()
    group = body["spec"]["workerGroupSpecs"][0]
    group["replicas"] = 1
    group["scaleStrategy"] = {"workersToDelete": ["w1", "not-a-pod"]}
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    assert deleted_names(plan) == {"w1"}
    assert not plan.create
    # KubeRay never clears the list: a spec write would look like drift to GitOps tools.
    assert not hasattr(plan, "clear_workers_to_delete")
    assert group["scaleStrategy"]["workersToDelete"] == ["w1", "not-a-pod"]


def test_terminating_pods_are_not_counted() -> None:
    pods = full_cluster_pods()
    pods[2]["metadata"]["deletionTimestamp"] = "2026-01-01T00:02:00Z"
    plan = plan_cluster(cluster(), pods, VERSION)
    assert len(plan.create) == 1 and not plan.delete


def test_suspend_deletes_everything_then_reports_suspended() -> None:
    body = cluster(suspend=True)
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    assert deleted_names(plan) == {"demo-head-aaaaa", "w1", "w2"}
    assert plan.suspending and not plan.suspended and not plan.create
    status = cluster_status(body, full_cluster_pods(), None, plan, [], NOW)
    assert conditions.is_true(status["conditions"], "RayClusterSuspending")
    assert conditions.find(status["conditions"], "RayClusterSuspended")["status"] == "False"
    # KubeRay keeps reporting what the spec asks for while the cluster is suspended.
    assert status["desiredWorkerReplicas"] == 2

    body["status"] = status
    done = plan_cluster(body, [], VERSION)
    assert done.suspended and not done.suspending
    status = cluster_status(body, [], None, done, [], NOW)
    assert conditions.is_true(status["conditions"], "RayClusterSuspended")
    assert conditions.find(status["conditions"], "RayClusterSuspending")["status"] == "False"
    assert status["state"] == "suspended"


def test_suspension_finishes_even_if_unsuspended_midway() -> None:
    body = cluster()
    body["status"] = {"conditions": [{"type": "RayClusterSuspending", "status": "True"}]}
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    assert len(plan.delete) == 3 and not plan.create


def test_resume_after_suspended_creates_pods() -> None:
    body = cluster()
    body["status"] = {"conditions": [{"type": "RayClusterSuspended", "status": "True"}]}
    plan = plan_cluster(body, [], VERSION)
    assert len(plan.create) == 3
    status = cluster_status(body, [], None, plan, [], NOW)
    assert conditions.find(status["conditions"], "RayClusterSuspended")["status"] == "False"


def test_recreate_on_image_change_only() -> None:
    old = cluster(upgradeStrategy={"type": "Recreate"})
    pods = full_cluster_pods(old)
    changed = cluster(upgradeStrategy={"type": "Recreate"})
    changed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:new"
    plan = plan_cluster(changed, pods, VERSION)
    assert plan.recreating and deleted_names(plan) == {"demo-head-aaaaa", "w1", "w2"} and not plan.create

    scaled = cluster(upgradeStrategy={"type": "Recreate"})
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    plan = plan_cluster(scaled, pods, VERSION)
    assert not plan.recreating and not plan.delete and len(plan.create) == 1


def test_no_recreate_without_strategy() -> None:
    pods = full_cluster_pods()
    changed = cluster()
    changed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:new"
    plan = plan_cluster(changed, pods, VERSION)
    assert not plan.delete and not plan.create


def test_operator_version_change_restamps_without_recreating() -> None:
    old = cluster(upgradeStrategy={"type": "Recreate"})
    pods = full_cluster_pods(old)
    for p in pods:
        p["metadata"]["annotations"][labels.HASH_ANNOTATION] = "hash-from-an-older-operator"
    plan = plan_cluster(old, pods, "2.0.0")
    assert not plan.delete and not plan.create
    assert sorted(plan.restamp) == ["demo-head-aaaaa", "w1", "w2"]


def test_upgrade_strategy_rejected_on_cluster_of_rayjob() -> None:
    body = cluster(upgradeStrategy={"type": "Recreate"})
    body["metadata"]["labels"] = {labels.ORIGINATED_FROM_CRD: "RayJob"}
    plan = plan_cluster(body, [], VERSION)
    assert plan.errors and "upgradeStrategy" in plan.errors[0]
    assert not plan.create
    status = cluster_status(body, [], None, plan, [], NOW)
    failure = conditions.find(status["conditions"], "ReplicaFailure")
    assert failure["status"] == "True" and failure["reason"] == "ValidationFailed"


def test_validation_rules() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"].append(dict(body["spec"]["workerGroupSpecs"][0]))
    body["spec"]["workerGroupSpecs"][0] = {**body["spec"]["workerGroupSpecs"][0], "minReplicas": 5}
    errors = validate_cluster(body)
    assert any("used by more than one group" in e for e in errors)
    assert any("minReplicas (5) > maxReplicas (4)" in e for e in errors)


def test_status_of_ready_cluster() -> None:
    body = cluster()
    body["metadata"]["generation"] = 7
    service = {"spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "dashboard", "port": 8265}]}}
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    status = cluster_status(body, full_cluster_pods(), service, plan, [], NOW)
    assert status["state"] == "ready"
    assert status["readyWorkerReplicas"] == 2 and status["availableWorkerReplicas"] == 2
    assert status["desiredWorkerReplicas"] == 2
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (1, 4)
    # Requests first, limits where no request (KubeRay): head 1 + 2 workers x 1500m (limit only).
    assert status["desiredCPU"] == "4"
    assert status["desiredGPU"] == "2"
    assert status["desiredMemory"] == "18Gi"  # head request 2Gi + 2 x 8Gi
    assert status["head"] == {
        "serviceName": "demo-head-svc",
        "podName": "demo-head-aaaaa",
        "podIP": "10.0.0.1",
        "serviceIP": "10.96.0.10",
    }
    assert status["endpoints"] == {"dashboard": "8265"}
    assert status["observedGeneration"] == 7
    assert conditions.is_true(status["conditions"], "HeadPodReady")
    assert conditions.find(status["conditions"], "RayClusterProvisioned")["reason"] == (
        "AllPodRunningAndReadyFirstTime"
    )
    assert status["stateTransitionTimes"] == {"ready": NOW}


def test_state_transition_times_keep_earlier_states() -> None:
    body = cluster()
    body["status"] = {"state": "suspended", "stateTransitionTimes": {"suspended": "2026-01-01T00:00:00Z"}}
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    status = cluster_status(body, full_cluster_pods(), None, plan, [], NOW)
    assert status["stateTransitionTimes"] == {"suspended": "2026-01-01T00:00:00Z", "ready": NOW}
    body["status"] = status
    again = cluster_status(body, full_cluster_pods(), None, plan, [], "2030-01-01T00:00:00Z")
    assert again["stateTransitionTimes"]["ready"] == NOW


def test_status_while_provisioning() -> None:
    body = cluster()
    plan = plan_cluster(body, [], VERSION)
    status = cluster_status(body, [], None, plan, ["create worker pod: quota exceeded"], NOW)
    assert status["state"] is None
    assert conditions.find(status["conditions"], "HeadPodReady")["reason"] == "HeadPodNotFound"
    assert conditions.find(status["conditions"], "RayClusterProvisioned")["status"] == "False"
    assert conditions.find(status["conditions"], "ReplicaFailure")["reason"] == "FailedCreatePod"


def multi_host_cluster(replicas: int = 2, hosts: int = 2) -> dict[str, Any]:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0].update(replicas=replicas, numOfHosts=hosts)
    return body


def replica_pods(replica: str, hosts: int = 2, created: str = "2026-01-01T00:00:01Z") -> list[dict[str, Any]]:
    pods = []
    for host in range(hosts):
        p = pod(f"{replica}-{host}", "worker", "gpu", created=created)
        p["metadata"]["labels"]["ray.io/worker-group-replica-name"] = replica
        p["metadata"]["labels"]["ray.io/replica-host-index"] = str(host)
        pods.append(p)
    return pods


def test_multi_host_replicas_are_created_whole() -> None:
    plan = plan_cluster(multi_host_cluster(replicas=2, hosts=2), [pod("demo-head-aaaaa", "head")], VERSION)
    workers = [p for p in plan.create if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert len(workers) == 4
    by_replica: dict[str, list[str]] = {}
    for p in workers:
        meta_labels = p["metadata"]["labels"]
        by_replica.setdefault(meta_labels["ray.io/worker-group-replica-name"], []).append(
            meta_labels["ray.io/replica-host-index"]
        )
    assert sorted(sorted(v) for v in by_replica.values()) == [["0", "1"], ["0", "1"]]
    assert all(name.startswith("gpu-") for name in by_replica)


def test_multi_host_replica_missing_a_host_is_replaced_whole() -> None:
    pods = [pod("demo-head-aaaaa", "head"), *replica_pods("gpu-aaaaa"), *replica_pods("gpu-bbbbb")[:1]]
    plan = plan_cluster(multi_host_cluster(), pods, VERSION)
    assert deleted_names(plan) == {"gpu-bbbbb-0"}
    assert len(plan.create) == 2


def test_multi_host_scale_down_and_workers_to_delete_remove_whole_replicas() -> None:
    pods = [
        pod("demo-head-aaaaa", "head"),
        *replica_pods("gpu-old", created="2026-01-01T00:00:01Z"),
        *replica_pods("gpu-new", created="2026-01-01T00:00:09Z"),
    ]
    plan = plan_cluster(multi_host_cluster(replicas=1), pods, VERSION)
    assert deleted_names(plan) == {"gpu-new-0", "gpu-new-1"} and not plan.create

    body = multi_host_cluster(replicas=1)
    body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["gpu-old-1"]}
    plan = plan_cluster(body, pods, VERSION)
    assert deleted_names(plan) == {"gpu-old-0", "gpu-old-1"} and not plan.create


# --- the admission cap (the queue integration's second lock) ---------------------------------


def test_cap_without_head_creates_nothing() -> None:
    plan = plan_cluster(cluster(), [], VERSION, caps=AdmittedCaps(head=False, workers={"gpu": 5}))
    assert plan.create == []


def test_cap_bounds_worker_creation_in_one_reconcile() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 5
    plan = plan_cluster(body, [], VERSION, caps=AdmittedCaps(head=True, workers={"gpu": 2}))
    created = [p for p in plan.create if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    heads = [p for p in plan.create if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert len(heads) == 1 and len(created) == 2


def test_cap_counts_existing_pods() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    pods = full_cluster_pods()  # a head and two workers
    plan = plan_cluster(body, pods, VERSION, caps=AdmittedCaps(head=True, workers={"gpu": 3}))
    assert len(plan.create) == 1 and not plan.delete


def test_pods_beyond_a_lowered_cap_are_removed() -> None:
    plan = plan_cluster(
        cluster(), full_cluster_pods(), VERSION, caps=AdmittedCaps(head=True, workers={"gpu": 1})
    )
    assert not plan.create
    assert len(plan.delete) == 1 and plan.delete[0].reason == "ScaleDown"


def test_unknown_group_gets_no_pods_under_a_cap() -> None:
    plan = plan_cluster(cluster(), [], VERSION, caps=AdmittedCaps(head=True, workers={}))
    assert [p["metadata"]["labels"]["ray.io/node-type"] for p in plan.create] == ["head"]


def test_multi_host_cap_admits_whole_replicas_only() -> None:
    body = cluster()
    group = body["spec"]["workerGroupSpecs"][0]
    group["replicas"], group["numOfHosts"] = 3, 2
    plan = plan_cluster(body, [], VERSION, caps=AdmittedCaps(head=True, workers={"gpu": 5}))
    workers = [p for p in plan.create if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert len(workers) == 4  # two whole replicas of two hosts; a fifth pod would split a replica


def test_a_queued_cluster_carries_the_queue_verdict() -> None:
    body = cluster(suspend=True)
    plan = plan_cluster(body, [], VERSION)
    verdict = QueueCondition(False, "Pending", "ClusterQueue team is stopped")
    status = cluster_status(body, [], None, plan, [], NOW, verdict)
    quota = conditions.find(status["conditions"], "QuotaReserved")
    assert quota is not None and quota["status"] == "False" and quota["message"] == verdict.message
    assert (
        conditions.find(cluster_status(body, [], None, plan, [], NOW)["conditions"], "QuotaReserved") is None
    )
