"""The integration records' multi-cluster parts, the views the decision reads, the free-quota
measure, the settings, and the worker-side prebuilt Workload."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.api.multikueue_v1alpha1 import MULTIKUEUE_CONTROLLER, ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.admission.workload_status import desired_status
from rayquota.operator.queue.gating import placement
from rayquota.operator.queue.multikueue import free_quota
from rayquota.operator.queue.multikueue.remote import ATTEMPT_ANNOTATION, workload_copy
from rayquota.operator.queue.multikueue.settings import Dispatcher
from rayquota.operator.queue.multikueue.views import attempt, local_view, worker_view
from rayquota.operator.queue.objects import workload_key
from rayquota.queueing import CheckState
from tests.config_env import multikueue_from_env

GPU_PLACEMENT = {
    "nodeSelector": {"rayquota.io/gpu-pool": "a100"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def cluster_spec(replicas: int = 2) -> dict[str, Any]:
    worker = {"name": "w", "image": "ray", "resources": {"requests": {"nvidia.com/gpu": "4"}}}
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": replicas,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def rayjob() -> dict[str, Any]:
    spec = cluster_spec()
    placement.inject(spec["workerGroupSpecs"][0]["template"], GPU_PLACEMENT)  # the manager's flavor
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["ray.io/rayjob-finalizer"],
            "labels": {"kueue.x-k8s.io/queue-name": "team", "team": "a"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "kept"},
        },
        "spec": {
            "managedBy": MULTIKUEUE_CONTROLLER,
            "suspend": False,
            "entrypoint": "python x.py",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": spec,
        },
        "status": {"jobDeploymentStatus": "Running"},
    }


def test_the_copy_keeps_labels_and_spec_and_loses_manager_only_parts() -> None:
    adapter = ADAPTERS["RayJob"]
    assert adapter.multicluster is not None
    body = adapter.multicluster.remote_body(rayjob(), adapter.gate.path, "rayjob-train-abcde", "mk")
    meta = body["metadata"]
    assert set(meta) == {"name", "namespace", "labels", "annotations"}
    assert meta["labels"] == {
        "kueue.x-k8s.io/queue-name": "team",
        "team": "a",
        ORIGIN_LABEL: "mk",
        PREBUILT_WORKLOAD_LABEL: "rayjob-train-abcde",
    }
    assert meta["annotations"] == {"note": "kept"}
    spec = body["spec"]
    assert "managedBy" not in spec and spec["suspend"] is True  # born gated, run by the worker
    assert spec["rayClusterSpec"] == cluster_spec()  # the manager's placement taken out
    assert "status" not in body


def test_a_copy_needs_managed_by_multikueue() -> None:
    part = ADAPTERS["RayJob"].multicluster
    assert part is not None
    assert part.refusal(rayjob()) is None
    unmanaged = rayjob()
    del unmanaged["spec"]["managedBy"]
    assert "spec.managedBy is unset" in str(part.refusal(unmanaged))


# Kinds MultiKueue does not dispatch (docs/operations.md says so): a worker without JobSet's CRD
# would fail the watch of every kind the manager copies there; the dispatcher refuses them in words.
NOT_DISPATCHED = {"JobSet"}


def test_every_queued_kind_is_dispatched_but_those_listed() -> None:
    assert {kind for kind, adapter in ADAPTERS.items() if adapter.multicluster is None} == NOT_DISPATCHED


def rayservice(cluster: dict[str, Any], serve: str = "applications: []") -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"serveConfigV2": serve, "rayClusterConfig": cluster},
    }


def test_a_rayservice_config_change_follows_to_the_worker_keeping_its_gate_and_placement() -> None:
    part = ADAPTERS["RayService"].multicluster
    assert part is not None and part.spec_update is not None
    remote_cluster = {**cluster_spec(), "suspend": True}
    placement.inject(remote_cluster["workerGroupSpecs"][0]["template"], GPU_PLACEMENT)  # the worker's
    remote = rayservice(remote_cluster)
    assert part.spec_update(rayservice({**cluster_spec(), "suspend": True}), remote) is None
    updated = part.spec_update(rayservice(cluster_spec(replicas=3), "applications: [x]"), remote)
    assert updated is not None
    assert updated["serveConfigV2"] == "applications: [x]"
    assert updated["rayClusterConfig"]["suspend"] is True
    assert updated["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] == 3


def test_a_raycluster_size_follows_unless_it_autoscales() -> None:
    part = ADAPTERS["RayCluster"].multicluster
    assert part is not None and part.spec_update is not None
    remote = {"spec": cluster_spec(replicas=2)}
    updated = part.spec_update({"spec": cluster_spec(replicas=4)}, remote)
    assert updated is not None and updated["workerGroupSpecs"][0]["replicas"] == 4
    autoscaled = {"spec": {**cluster_spec(replicas=5), "enableInTreeAutoscaling": True}}
    assert part.spec_update({"spec": cluster_spec(replicas=4)}, autoscaled) is None


def job(suspend: bool, complete: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if complete else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "managedBy": MULTIKUEUE_CONTROLLER,
            "suspend": suspend,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {
                "metadata": {
                    "labels": {"batch.kubernetes.io/controller-uid": "u", "controller-uid": "u", "app": "x"}
                },
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
            },
        },
        "status": {"active": 1, "conditions": conditions},
    }


def test_a_job_copy_drops_its_selector_and_its_status_waits_while_the_manager_job_is_suspended() -> None:
    adapter = ADAPTERS["Job"]
    part = adapter.multicluster
    assert part is not None
    body = part.remote_body(job(suspend=True), adapter.gate.path, "job-j-1", "mk")
    assert "selector" not in body["spec"]
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert part.status(job(suspend=True), job(suspend=False)) is None
    assert part.status(job(suspend=False), job(suspend=False)) == {"active": 1, "conditions": []}
    assert part.status(job(suspend=True), job(suspend=False, complete=True)) is not None


def workload(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "rayjob-train-abcde", "namespace": "ns", "labels": {"x": "y"}, "uid": "w"},
        "spec": {
            "queueName": "team",
            "podSets": [{"name": "gpu", "count": 2, "requests": {"nvidia.com/gpu": "4"}}],
        },
        "status": status,
    }


RESERVED = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:07Z"}]
ENTRY = {"name": "mk", "state": "Pending", "lastTransitionTime": "2026-01-01T00:00:07Z", "retryCount": 2}


def test_the_attempt_changes_with_each_reservation_and_each_retry() -> None:
    first = workload(conditions=RESERVED, admission={"clusterQueue": "q"})
    assert attempt(first, ENTRY) == "2/2026-01-01T00:00:07Z"
    later = workload(conditions=[{**RESERVED[0], "lastTransitionTime": "2026-01-01T00:05:00Z"}])
    assert attempt(later, ENTRY) != attempt(first, ENTRY)
    assert attempt(first, {**ENTRY, "retryCount": 3}) != attempt(first, ENTRY)


def test_the_copy_of_a_workload_carries_its_spec_origin_and_attempt_but_no_status() -> None:
    body = workload_copy(workload(conditions=RESERVED), "mk", "2/t")
    assert body["spec"] == workload()["spec"]
    assert body["metadata"]["labels"] == {"x": "y", ORIGIN_LABEL: "mk"}
    assert body["metadata"]["annotations"] == {ATTEMPT_ANNOTATION: "2/t"}
    assert "status" not in body and "uid" not in body["metadata"]


def test_a_workload_is_reserved_only_with_an_admission_and_no_eviction() -> None:
    reserved = workload(conditions=RESERVED, admission={"clusterQueue": "q"}, clusterName="w1")
    view = local_view(reserved, ENTRY, object_gone=False)
    assert view.reserved and not view.done and view.cluster_name == "w1"
    assert view.state is CheckState.PENDING
    evicted = workload(
        conditions=[*RESERVED, {"type": "Evicted", "status": "True"}], admission={"clusterQueue": "q"}
    )
    assert not local_view(evicted, ENTRY, object_gone=False).reserved
    assert local_view(reserved, ENTRY, object_gone=True).done


def test_a_worker_object_without_its_current_copy_is_stray() -> None:
    current = {"metadata": {"annotations": {ATTEMPT_ANNOTATION: "2/t"}}}
    old = {"metadata": {"annotations": {ATTEMPT_ANNOTATION: "1/t"}}}
    copy_ = {"metadata": {"annotations": {ATTEMPT_ANNOTATION: "2/t"}}, "status": {}}
    fine = worker_view(
        "w", connected=True, lost_since=None, copy=copy_, objects=[current], local_attempt="2/t"
    )
    assert fine.copy is not None and fine.copy.has_object and not fine.stray_object
    assert worker_view(
        "w", connected=True, lost_since=None, copy=copy_, objects=[old], local_attempt="2/t"
    ).stray_object
    assert worker_view(
        "w", connected=True, lost_since=None, copy=None, objects=[current], local_attempt="2/t"
    ).stray_object
    lost = worker_view("w", connected=False, lost_since=5.0, copy=copy_, objects=[], local_attempt="2/t")
    assert not lost.reachable and lost.lost_since == 5.0 and lost.copy is None


def test_room_counts_how_many_more_like_it_fit_by_the_scarcest_resource() -> None:
    queue = {
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "a",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 8},
                                {"name": "cpu", "nominalQuota": "100"},
                            ],
                        },
                        {"name": "b", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]},
                    ]
                }
            ]
        },
        "status": {
            "flavorsReservation": [{"name": "a", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]
        },
    }
    free = free_quota.free_per_resource(queue)
    assert free["nvidia.com/gpu"] == 12_000 and free["cpu"] == 100_000
    requests = free_quota.requests_of(workload()["spec"])
    assert requests == {"nvidia.com/gpu": 8_000}
    assert free_quota.room(requests, free) == 1.5
    assert free_quota.room(requests, None) == 0
    kueue_shaped = {
        "podSets": [
            {"count": 2, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "2"}}}]}}}
        ]
    }
    assert free_quota.requests_of(kueue_shaped) == {"cpu": 4_000}
    lq = {"metadata": {"namespace": "ns", "name": "team"}, "spec": {"clusterQueue": "cq"}}
    assert free_quota.cluster_queue_of([lq], {"cq": queue}, "ns", "team") is queue
    assert free_quota.cluster_queue_of([lq], {"cq": queue}, "other", "team") is None


def test_settings_are_off_by_default_and_read_by_name() -> None:
    assert multikueue_from_env({}) is None
    read = multikueue_from_env(
        {
            "RAYQUOTA_MULTIKUEUE": "true",
            "RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT": "30",
            "RAYQUOTA_MULTIKUEUE_DISPATCHER": "MostFreeQuota",
            "RAYQUOTA_OPERATOR_NAMESPACE": "ops",
        }
    )
    assert read is not None
    assert (read.worker_lost_timeout_s, read.dispatcher, read.namespace) == (
        30.0,
        Dispatcher.MOST_FREE_QUOTA,
        "ops",
    )
    with pytest.raises(ValueError, match="RAYQUOTA_MULTIKUEUE_DISPATCHER"):
        multikueue_from_env({"RAYQUOTA_MULTIKUEUE": "1", "RAYQUOTA_MULTIKUEUE_DISPATCHER": "Nope"})
    with pytest.raises(ValueError, match="WORKER_LOST_TIMEOUT"):
        multikueue_from_env(
            {"RAYQUOTA_MULTIKUEUE": "1", "RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT": "-1"}
        )


def test_a_worker_runs_the_object_under_the_prebuilt_workload_but_its_children_never_claim_it() -> None:
    obj = rayjob()
    obj["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] = "rayjob-train-abcde"
    assert workload_key("RayJob", obj).name == "rayjob-train-abcde"
    child = copy.deepcopy(obj)
    child["kind"] = "RayCluster"
    child["metadata"]["ownerReferences"] = [
        {"kind": "RayJob", "name": "train", "uid": "u-1", "controller": True}
    ]
    assert workload_key("RayCluster", child).name == naming.workload_name("RayCluster", "train", "u-1")


def test_the_chosen_worker_lasts_as_long_as_the_reservation() -> None:
    from rayquota.operator.queue.admission.driver import AdmittedSlice

    previous = {
        "clusterName": "w1",
        "admission": {"clusterQueue": "q"},
        "admissionChecks": [{"name": "mk", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    held = desired_status(
        previous,
        admission=AdmittedSlice("q", (), {}, ()),  # a scale-up slice: no check of its own
        eviction=None,
        pending_reason=None,
        finished=False,
        now="2026-01-01T00:01:00Z",
    )
    assert held["clusterName"] == "w1"
    assert held["admissionChecks"] == previous["admissionChecks"]  # the checks it passed stay
    released = desired_status(
        previous,
        admission=None,
        eviction=None,
        pending_reason="x",
        finished=False,
        now="2026-01-01T00:01:00Z",
    )
    assert "clusterName" not in released
    assert released["admissionChecks"][0]["state"] == "Pending"


def test_the_webhook_says_managed_by_multikueue_in_a_dispatching_queue_only() -> None:
    from rayquota.operator.webhooks import review
    from tests.unit.queue import bodies
    from tests.unit.queue.test_webhook_review import objects

    job = bodies.rayjob()
    job["spec"]["suspend"] = False
    queue = naming.explicit_queue_name(job, naming.QueueSettings())
    namespace = str(job["metadata"].get("namespace") or "")
    dispatched = review.mutate("RayJob", job, objects(), lambda ns, q: (ns, q) == (namespace, queue))
    assert {"op": "add", "path": "/spec/managedBy", "value": MULTIKUEUE_CONTROLLER} in dispatched.patch
    assert {"op": "add", "path": "/spec/suspend", "value": True} in dispatched.patch
    local = review.mutate("RayJob", job, objects(), lambda ns, q: False)
    assert all(op["path"] != "/spec/managedBy" for op in local.patch)
    job["spec"]["managedBy"] = "someone-else"  # a manager the user chose is kept
    kept = review.mutate("RayJob", job, objects(), lambda ns, q: True)
    assert all(op["path"] != "/spec/managedBy" for op in kept.patch)
