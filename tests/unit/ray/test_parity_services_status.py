"""KubeRay parity (issue 8) of Services, status, RayJob timeouts and the CRD fields KubeRay users set.
Each test names the point of the issue it guards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml

from rayquota.api.ray_unimplemented import unimplemented_fields, unimplemented_warning
from rayquota.api.ray_v1 import RayCluster, RayJob
from rayquota.operator.ray.builders import services
from rayquota.operator.ray.raycluster.plan import plan_cluster
from rayquota.operator.ray.raycluster.status import cluster_status, desired_resources
from rayquota.operator.ray.rayjob.timeouts import (
    TimeoutSettings,
    rayjob_timeout_verdict,
    record_status_check,
    seconds_until_next_timeout,
)
from rayquota.operator.ray.vocabulary import conditions, labels
from tests.unit.ray.fixtures import cluster
from tests.unit.ray.test_raycluster_plan import NOW, VERSION, full_cluster_pods

# --- 1: head Service ports -------------------------------------------------------------------------


def with_head_ports(*ports: dict[str, Any]) -> dict[str, Any]:
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = list(ports)
    return body


def test_kuberay_sample_ports_make_a_valid_service() -> None:
    # ray-cluster.complete.yaml names 6379 `gcs`: no `gcs-server` may be added next to it.
    body = with_head_ports(
        {"containerPort": 6379, "name": "gcs"},
        {"containerPort": 8265, "name": "dashboard"},
        {"containerPort": 10001, "name": "client"},
    )
    ports = {p["name"]: p["port"] for p in services.build_head_service(body)["spec"]["ports"]}
    assert ports == {"gcs": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080}


def test_no_port_number_twice_and_unnamed_ports_get_kuberays_name() -> None:
    body = with_head_ports(
        {"containerPort": 8080, "name": "prom"},
        {"containerPort": 6379},
        {"containerPort": 6379, "name": "gcs-again"},
    )
    ports = services.head_service_ports(body)
    assert ports == {"prom": 8080, "6379-port": 6379}
    numbers = [p["port"] for p in services.build_head_service(body)["spec"]["ports"]]
    assert len(numbers) == len(set(numbers))


def test_defaults_only_when_the_head_names_no_ports() -> None:
    assert services.head_service_ports(cluster()) == services.DEFAULT_HEAD_PORTS


# --- 2: head Service shape -------------------------------------------------------------------------


def test_head_service_is_headless_and_published_before_ready() -> None:
    svc = services.build_head_service(cluster())
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert {p["appProtocol"] for p in svc["spec"]["ports"]} == {"tcp"}


def test_node_port_head_service_keeps_a_virtual_ip() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    spec = services.build_head_service(body)["spec"]
    assert spec["type"] == "NodePort" and "clusterIP" not in spec


def test_custom_head_service_is_the_base() -> None:
    body = cluster()
    body["spec"]["headServiceAnnotations"] = {"a": "1"}
    body["spec"]["headGroupSpec"]["headService"] = {
        "metadata": {"name": "mine", "labels": {"x": "y"}},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "extra", "port": 9999}]},
    }
    svc = services.build_head_service(body)
    assert svc["metadata"]["name"] == "mine" and svc["metadata"]["annotations"] == {"a": "1"}
    assert svc["metadata"]["labels"]["x"] == "y" and svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"][0]["name"] == "extra"
    assert svc["spec"]["selector"]["ray.io/node-type"] == "head"


def test_head_service_ip_column_shows_the_pod_ip_when_headless() -> None:
    body = cluster()
    svc = services.build_head_service(body)
    plan = plan_cluster(body, full_cluster_pods(), VERSION)
    status = cluster_status(body, full_cluster_pods(), svc, plan, [], NOW)
    assert status["head"]["serviceIP"] == status["head"]["podIP"] == "10.0.0.1"
    assert status["endpoints"]["dashboard"] == "8265"


# --- 5: the RayJob's head Service and the multi-host headless Service -------------------------------


def test_rayjob_head_service_is_owned_by_the_rayjob_and_selects_the_cluster() -> None:
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "team-a", "uid": "uid-j"},
    }
    svc = services.build_rayjob_head_service(rayjob, cluster())
    assert svc["metadata"]["name"] == "job-head-svc"
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "uid-j"
    assert svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "job",
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/node-type": "head",
        "ray.io/identifier": "job-head",
    }
    assert svc["spec"]["selector"]["ray.io/cluster"] == "demo"
    assert svc["spec"]["clusterIP"] == "None"


def test_multi_host_groups_get_a_headless_worker_service() -> None:
    body = cluster()
    assert not services.needs_headless_worker_service(body)
    body["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 4
    assert services.needs_headless_worker_service(body)
    svc = services.build_headless_worker_service(body)
    assert svc["metadata"]["name"] == "demo-headless"
    assert svc["metadata"]["labels"] == {"ray.io/headless-worker-svc": "demo", "ray.io/cluster": "demo"}
    assert svc["spec"] == {
        "type": "ClusterIP",
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"ray.io/cluster": "demo", "ray.io/node-type": "worker"},
    }


def test_serve_service_takes_every_serve_port() -> None:
    body = with_head_ports(
        {"containerPort": 8000, "name": "serve"}, {"containerPort": 9000, "name": "serve-grpc"}
    )
    body["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    ports = {p["name"]: p["port"] for p in services.build_serve_service(body)["spec"]["ports"]}
    assert ports == {"serve": 8000, "serve-grpc": 9000}


# --- 10: status columns ----------------------------------------------------------------------------


def test_columns_sum_requests_then_limits_and_count_tpus() -> None:
    body = cluster()
    group = body["spec"]["workerGroupSpecs"][0]
    group["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "4", "memory": "4Gi", "google.com/tpu": "4"},
    }
    group["numOfHosts"] = 2
    totals = desired_resources(body)
    # head: requests cpu 1, memory 2Gi; workers: 2 replicas x 2 hosts x (1 cpu, 1Gi, 4 TPU)
    assert (totals["cpu"], totals["memory"], totals["tpu"]) == (5, 6 * 1024**3, 16)


def test_tpus_column_is_wide_only() -> None:
    columns = {c.name: c for c in RayCluster.crd.printer_columns}
    assert columns["tpus"].json_path == ".status.desiredTPU" and columns["tpus"].priority == 1


# --- 14: status like KubeRay's ---------------------------------------------------------------------


def test_suspend_conditions_always_present_and_zero_counts_omitted() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0].update(replicas=0, minReplicas=0)
    plan = plan_cluster(body, [], VERSION)
    status = cluster_status(body, [], None, plan, [], NOW)
    for condition_type in ("RayClusterSuspended", "RayClusterSuspending"):
        condition = conditions.find(status["conditions"], condition_type)
        assert condition is not None and condition["status"] == "False"
        assert condition["reason"] == condition_type
    for key in (
        "readyWorkerReplicas",
        "availableWorkerReplicas",
        "desiredWorkerReplicas",
        "minWorkerReplicas",
    ):
        assert key not in status
    assert status["maxWorkerReplicas"] == 4 and status["desiredCPU"] == "1"


def test_suspended_group_is_left_out_of_min_max_and_resources() -> None:
    body = cluster()
    body["spec"]["workerGroupSpecs"][0]["suspend"] = True
    status = cluster_status(body, [], None, plan_cluster(body, [], VERSION), [], NOW)
    assert "desiredWorkerReplicas" not in status and "maxWorkerReplicas" not in status
    assert status["desiredGPU"] == "0"


# --- 15: worker-group suspend on a Recreate cluster (a documented difference) -----------------------


def test_group_suspend_on_recreate_cluster_keeps_the_head() -> None:
    # KubeRay's Recreate hash includes the group's `suspend`, so it recreates every pod, head included.
    # Ours leaves it out: suspending one group removes that group's pods only (docs/kuberay-compatibility.md).
    body = cluster(upgradeStrategy={"type": "Recreate"})
    pods = full_cluster_pods(body)
    body["spec"]["workerGroupSpecs"][0]["suspend"] = True
    plan = plan_cluster(body, pods, VERSION)
    deleted = {d.pod["metadata"]["name"] for d in plan.delete}
    assert deleted == {"w1", "w2"} and not plan.recreating and not plan.create


# --- 11: RayJob timeouts ---------------------------------------------------------------------------

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def job(deployment: str, **status: Any) -> dict[str, Any]:
    return {
        "spec": {},
        "status": {"jobDeploymentStatus": deployment, "startTime": "2026-01-01T00:00:00Z", **status},
    }


def test_submitter_finished_but_job_status_unknown_fails_after_30s() -> None:
    body = job("Running", jobStatus="RUNNING")
    finished = T0 + dt.timedelta(seconds=10)
    assert rayjob_timeout_verdict(body, finished + dt.timedelta(seconds=29), finished) is None
    verdict = rayjob_timeout_verdict(body, finished + dt.timedelta(seconds=30), finished)
    assert verdict is not None
    assert (verdict.deployment_status, verdict.reason, verdict.job_status) == (
        "Failed",
        "JobDeploymentStatusTransitionGracePeriodExceeded",
        "FAILED",
    )
    assert seconds_until_next_timeout(body, finished + dt.timedelta(seconds=20), finished) == 10


def test_failing_status_checks_fail_the_job_after_300s() -> None:
    status: dict[str, Any] = {}
    assert record_status_check(status, False, "2026-01-01T00:01:00Z")
    assert not record_status_check(status, False, "2026-01-01T00:02:00Z")  # the first failure counts
    body = job("Running", **status)
    assert rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=359)) is None
    verdict = rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=360))
    assert verdict is not None and verdict.reason == "JobStatusCheckTimeoutExceeded"
    assert verdict.deployment_status == "Failed"
    assert record_status_check(status, True, "x") and status == {}


def test_pre_running_deadline() -> None:
    body = job("Initializing")
    body["spec"]["preRunningDeadlineSeconds"] = 60
    assert rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=59)) is None
    verdict = rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=60))
    assert verdict is not None and verdict.reason == "PreRunningDeadlineExceeded"
    body["status"]["jobDeploymentStatus"] = "Running"
    assert rayjob_timeout_verdict(body, T0 + dt.timedelta(days=1)) is None


@pytest.mark.parametrize(("job_status", "outcome"), [("SUCCEEDED", "Complete"), ("FAILED", "Failed")])
def test_ended_job_that_stays_running_is_finished_after_the_grace_period(
    job_status: str, outcome: str
) -> None:
    body = job("Running", jobStatus=job_status, rayJobInfo={"endTime": "2026-01-01T00:00:00Z"})
    settings = TimeoutSettings(transition_grace_s=300)
    assert rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=299), settings=settings) is None
    verdict = rayjob_timeout_verdict(body, T0 + dt.timedelta(seconds=300), settings=settings)
    assert verdict is not None and verdict.deployment_status == outcome


@pytest.mark.parametrize("state", ["Initializing", "Waiting", "Running"])
def test_active_deadline_is_a_timer_while_the_job_is_active(state: str) -> None:
    # A RayJob waiting for its cluster is not polled: the deadline itself must wake it.
    body = job(state)
    body["spec"]["activeDeadlineSeconds"] = 8
    assert seconds_until_next_timeout(body, T0 + dt.timedelta(seconds=3)) == 5
    assert seconds_until_next_timeout(body, T0 + dt.timedelta(seconds=30)) == 0
    body["status"]["jobDeploymentStatus"] = "Suspended"
    assert seconds_until_next_timeout(body, T0 + dt.timedelta(seconds=3)) is None


def test_terminal_rayjobs_have_no_timer() -> None:
    body = job("Complete", jobStatus="SUCCEEDED", jobStatusCheckFailureStartTime="2026-01-01T00:00:00Z")
    assert rayjob_timeout_verdict(body, T0 + dt.timedelta(days=1)) is None
    assert seconds_until_next_timeout(body, T0) is None


# --- 12: fields KubeRay users set round-trip through our models and CRDs ----------------------------

KUBERAY_ONLY_CLUSTER_FIELDS = {
    "historyServerOptions": {"collectorOptions": {"image": "quay.io/kuberay/collector:v1"}},
    "networkPolicy": {"mode": "DenyAllIngress", "head": {"ingressRules": [{"from": [{"podSelector": {}}]}]}},
    "tlsOptions": {"enabled": True},
    "autoscalerOptions": {"command": ["/bin/bash", "-c"], "args": ["$KUBERAY_GEN_AUTOSCALER_START_CMD"]},
}


def rich_cluster() -> dict[str, Any]:
    body = cluster(**KUBERAY_ONLY_CLUSTER_FIELDS)
    body["spec"]["headGroupSpec"].update(
        labels={"zone": "a"}, resources={"CPU": "0"}, ingressOptions={"host": "ray.example.com", "path": "/"}
    )
    body["spec"]["workerGroupSpecs"][0].update(labels={"zone": "b"}, resources={"GPU": "1"}, priority=5)
    return body


def test_kuberay_fields_survive_the_model() -> None:
    body = rich_cluster()
    spec = RayCluster.from_body(body).to_body()["spec"]
    for key, value in KUBERAY_ONLY_CLUSTER_FIELDS.items():
        assert spec[key] == {**value, **({"mode": "DenyAllIngress"} if key == "networkPolicy" else {})}
    assert spec["headGroupSpec"]["ingressOptions"] == {"host": "ray.example.com", "path": "/"}
    assert spec["workerGroupSpecs"][0]["priority"] == 5
    rayjob = RayJob.from_body(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "j"},
            "spec": {"preRunningDeadlineSeconds": 30},
        }
    )
    assert rayjob.to_body()["spec"]["preRunningDeadlineSeconds"] == 30


def test_generated_crd_declares_every_kuberay_field() -> None:
    with open("crds/ray.io_rayclusters.yaml") as f:
        crd = yaml.safe_load(f)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for key in ("historyServerOptions", "networkPolicy", "tlsOptions"):
        assert key in spec
    assert {"command", "args"} <= set(spec["autoscalerOptions"]["properties"])
    assert {"labels", "resources", "ingressOptions"} <= set(spec["headGroupSpec"]["properties"])
    worker = spec["workerGroupSpecs"]["items"]["properties"]
    assert {"labels", "resources", "priority"} <= set(worker)
    with open("crds/ray.io_rayjobs.yaml") as f:
        job_crd = yaml.safe_load(f)
    job_spec = job_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "preRunningDeadlineSeconds" in job_spec


def test_unimplemented_fields_are_named_for_the_warning_event() -> None:
    body = rich_cluster()
    # networkPolicy, tlsOptions and historyServerOptions are refused, not warned (test_security_fields).
    assert unimplemented_fields(body) == ["spec.headGroupSpec.ingressOptions"]
    assert unimplemented_fields(cluster()) == [] and unimplemented_warning(cluster()) is None
    head_only = {"headGroupSpec": {"ingressOptions": {"host": "h"}}}
    rayjob = {"kind": "RayJob", "spec": {"rayClusterSpec": head_only}}
    assert (
        unimplemented_warning(rayjob)
        == "field spec.rayClusterSpec.headGroupSpec.ingressOptions is not implemented and is ignored"
    )
    off = cluster(authOptions={"mode": "disabled"})
    assert unimplemented_fields(off) == []


def test_label_names_match_kuberay() -> None:
    assert labels.RAY_WORKER_REPLICA_INDEX == "ray.io/worker-group-replica-index"
    assert labels.RAY_JOB_SUBMISSION_MODE == "ray.io/job-submission-mode"
    assert labels.headless_service_name("x" * 70).endswith("-headless")


def test_submitter_finish_time_comes_from_the_jobs_condition() -> None:
    from rayquota.operator.ray.rayjob import submitter

    running = {"status": {"active": 1}}
    assert submitter.job_finished_at(running) is None
    done = {
        "status": {
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:30Z"}
            ]
        }
    }
    assert submitter.job_finished_at(done) == T0 + dt.timedelta(seconds=30)


def test_a_count_that_drops_to_zero_is_a_status_change() -> None:
    from rayquota.operator.ray.raycluster.status import status_changed

    assert status_changed({"readyWorkerReplicas": 2, "state": "ready"}, {"state": "ready"})
    assert not status_changed({"state": "ready", "lastUpdateTime": "a"}, {"state": "ready", "reason": None})
