"""Model behaviour: wire names, unknown-field preservation, validation, desired replica arithmetic."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rayquota.api.queueing_v1alpha1 import ClusterQueue, QueueingStrategy, StopPolicy
from rayquota.api.ray_v1 import (
    JobDeploymentStatus,
    JobStatus,
    RayCluster,
    RayJob,
    RayService,
    WorkerGroupSpec,
)
from rayquota.api.workload_v1alpha1 import Workload, WorkloadPriorityClass

HEAD = {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "r"}]}}}


def _cluster(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"headGroupSpec": HEAD, **spec},
    }


def test_unknown_fields_are_kept_through_a_round_trip() -> None:
    body = _cluster(authOptions={"mode": "token"}, someFutureField={"x": [1, 2]})
    body["spec"]["headGroupSpec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    assert RayCluster.from_body(body).to_body() == body


def test_wire_names_are_kubray_names() -> None:
    rc = RayCluster.from_body(_cluster())
    rc.spec.suspend = True
    rc.spec.enable_in_tree_autoscaling = False
    out = rc.to_body()["spec"]
    assert out["suspend"] is True
    assert out["enableInTreeAutoscaling"] is False


def test_special_aliases() -> None:
    job = RayJob.from_body(
        {
            "spec": {"runtimeEnvYAML": "pip: []", "jobId": "abc", "ttlSecondsAfterFinished": 5},
            "status": {"dashboardURL": "h:8265", "jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"},
        }
    )
    assert (job.spec.runtime_env_yaml, job.spec.job_id, job.spec.ttl_seconds_after_finished) == (
        "pip: []",
        "abc",
        5,
    )
    assert job.status is not None
    assert job.status.dashboard_url == "h:8265"
    assert job.status.job_status is JobStatus.SUCCEEDED and job.status.job_status.is_terminal
    assert job.status.job_deployment_status is JobDeploymentStatus.COMPLETE
    status = RayCluster.from_body(
        {**_cluster(), "status": {"desiredGPU": "4", "head": {"podIP": "10.0.0.1", "serviceIP": "10.1.0.1"}}}
    ).status
    assert status is not None and status.desired_gpu == "4"
    assert status.head is not None and status.head.pod_ip == "10.0.0.1"
    svc = RayService.from_body({"spec": {"rayClusterConfig": {"headGroupSpec": HEAD}, "serveConfigV2": "x"}})
    assert svc.spec.serve_config_v2 == "x"
    assert svc.spec.ray_cluster_spec.head_group_spec.ray_start_params == {}


def test_new_job_status_is_the_empty_string() -> None:
    job = RayJob.from_body({"spec": {}, "status": {"jobStatus": "", "jobDeploymentStatus": ""}})
    assert job.status is not None
    assert job.status.job_status is JobStatus.NEW
    assert job.status.job_deployment_status is JobDeploymentStatus.NEW


def test_a_kopf_like_nested_mapping_is_accepted() -> None:
    from types import MappingProxyType

    body = MappingProxyType({**_cluster(), "spec": MappingProxyType(_cluster()["spec"])})
    assert RayCluster.from_body(body).spec.head_group_spec.template.spec.containers[0].name == "ray-head"


@pytest.mark.parametrize(
    ("replicas", "minimum", "maximum", "hosts", "expected"),
    [(3, 1, 5, 1, 3), (0, 2, 5, 1, 2), (9, 0, 4, 1, 4), (2, 0, 4, 4, 8)],
)
def test_desired_pods_clamps_and_multiplies_by_hosts(
    replicas: int, minimum: int, maximum: int, hosts: int, expected: int
) -> None:
    group = WorkerGroupSpec.model_validate(
        {
            "groupName": "g",
            "template": {},
            "replicas": replicas,
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "numOfHosts": hosts,
        }
    )
    assert group.desired_pods == expected


def test_suspended_worker_group_wants_no_pods() -> None:
    group = WorkerGroupSpec.model_validate({"groupName": "g", "template": {}, "replicas": 3, "suspend": True})
    assert group.desired_pods == 0


@pytest.mark.parametrize("bad", ["-1", "1.5.5", "ten", "5Gb", -2])
def test_negative_or_malformed_quota_is_refused(bad: object) -> None:
    body = {
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": bad}]}],
                }
            ]
        }
    }
    with pytest.raises(ValidationError):
        ClusterQueue.from_body(body)


def test_cluster_queue_defaults() -> None:
    cq = ClusterQueue.from_body({"metadata": {"name": "q"}, "spec": {}})
    assert cq.spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert cq.spec.stop_policy is StopPolicy.NONE
    assert cq.spec.cohort is None


def test_workload_parses_admission() -> None:
    wl = Workload.from_body(
        {
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {
                "queueName": "team-a",
                "podSets": [{"name": "head", "count": 1, "requests": {"cpu": "1"}}],
            },
            "status": {
                "admission": {
                    "clusterQueue": "team-a",
                    "podSetAssignments": [
                        {"name": "head", "flavors": {"cpu": "cpu"}, "resourceUsage": {"cpu": "1"}, "count": 1}
                    ],
                },
                "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}],
            },
        }
    )
    assert wl.spec.active is True
    assert wl.status is not None and wl.status.admission is not None
    assert wl.status.admission.pod_set_assignments[0].flavors == {"cpu": "cpu"}


def test_priority_class_value_is_top_level() -> None:
    wpc = WorkloadPriorityClass.from_body({"metadata": {"name": "high"}, "value": 1000, "description": "d"})
    assert wpc.value == 1000
    assert wpc.to_body()["apiVersion"] == "rayquota.io/v1alpha1"
