"""KubeRay parity (issue 8) where it needs the API server: the objects exist, are accepted as built,
and carry what KubeRay's carry. kwok plays the Ray pods."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, condition, running, wait_for

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def load(relative: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((SAMPLES / relative).read_text()))


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def wait_state(kube: Kube, name: str, pods: int, timeout_s: float = 90.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        cluster = kube.get("raycluster", name)
        ready = (cluster or {}).get("status", {}).get("state") == "ready"
        return cluster if ready and len(running(kube.pods(name))) == pods else None

    return wait_for(f"RayCluster {name} ready with {pods} pods", probe, timeout_s)


def test_named_head_ports_give_a_working_headless_head_service(kube: Kube) -> None:
    """Points 1, 2, 5, 13, 14: KubeRay's port names (`gcs`), a headless head Service showing the pod
    IP, the multi-host headless Service, replica labels, suspend conditions present and False."""
    cluster = load("parity/ray-cluster.multi-host-gpu.yaml")
    name = cluster["metadata"]["name"]
    kube.apply(cluster)
    cluster = wait_state(kube, name, pods=3)

    service = kube.get("service", f"{name}-head-svc")
    assert service is not None, "the head Service was not created"
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "gcs": 6379,
        "dashboard": 8265,
        "client": 10001,
        "metrics": 8080,
    }
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert {p.get("appProtocol") for p in service["spec"]["ports"]} == {"tcp"}
    [head] = [p for p in kube.pods(name) if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    status = cluster["status"]
    assert status["head"]["serviceIP"] == head["status"]["podIP"] == status["head"]["podIP"]

    headless = kube.get("service", f"{name}-headless")
    assert headless is not None and headless["spec"]["clusterIP"] == "None"
    assert headless["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]

    workers = [p for p in kube.pods(name) if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    worker_labels = [w["metadata"]["labels"] for w in workers]
    assert sorted(w["ray.io/replica-host-index"] for w in worker_labels) == ["0", "1"]
    assert {w["ray.io/worker-group-replica-index"] for w in worker_labels} == {"0"}
    assert len({w["ray.io/worker-group-replica-name"] for w in worker_labels}) == 1
    assert all(w["app.kubernetes.io/created-by"] == "kuberay-operator" for w in worker_labels)

    for condition_type in ("RayClusterSuspended", "RayClusterSuspending"):
        found = condition(cluster, condition_type)
        assert found is not None and found["status"] == "False"
    # Requests, not limits: 2 CPU head + 2 hosts x 8 CPU.
    assert (status["desiredCPU"], status["desiredGPU"]) == ("18", "16")


def test_probes_env_and_autoscaler_rbac_are_accepted_by_the_api_server(kube: Kube) -> None:
    """Points 3, 6, 7, 8, 9, 12: what we build is valid as stored (probes, env, volumes), the
    autoscaler Role may resize pods, group labels reach the pods, and ignored fields are reported."""
    cluster = load("parity/ray-cluster.kuberay-fields.yaml")
    name = cluster["metadata"]["name"]
    kube.apply(cluster)
    wait_state(kube, name, pods=2)

    stored = kube.get("raycluster", name)
    assert stored is not None
    assert stored["spec"]["headGroupSpec"]["ingressOptions"]["host"] == "ray.example.com"
    assert stored["spec"]["workerGroupSpecs"][0]["priority"] == 10
    assert stored["spec"]["autoscalerOptions"]["args"] == [
        "ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD"
    ]

    pods = kube.pods(name)
    [head] = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    [worker] = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    ray_head, autoscaler = head["spec"]["containers"]
    assert "exec" in ray_head["readinessProbe"] and ray_head["livenessProbe"]["failureThreshold"] == 120
    assert ray_head["command"] == ["/bin/bash", "-c", "--"]
    env = {e["name"]: e for e in ray_head["env"]}
    assert env["RAY_CLUSTER_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert {"name": "ray-logs", "mountPath": "/tmp/ray"} in autoscaler["volumeMounts"]
    assert autoscaler["args"] == ["ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD"]
    assert worker["metadata"]["labels"]["ray.io/market-type"] == "spot"
    assert "--labels=ray.io/market-type=spot" in worker["spec"]["containers"][0]["args"][0]
    assert worker["spec"]["initContainers"][0]["name"] == "wait-gcs-ready"

    role = kube.get("role", name)
    assert role is not None and role["metadata"]["labels"]["app.kubernetes.io/name"] == "kuberay"
    assert {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]} in role["rules"]

    def warning() -> dict[str, Any] | None:
        found = [e for e in kube.events(name) if e["reason"] == "UnimplementedField"]
        return found[0] if found else None

    event = wait_for("UnimplementedField warning", warning, 60)
    assert event["type"] == "Warning"
    # networkPolicy, tlsOptions and historyServerOptions are refused (test_kuberay_production).
    assert event["message"] == "field spec.headGroupSpec.ingressOptions is not implemented and is ignored"


def test_rayjob_fails_when_not_running_by_its_pre_running_deadline(kube: Kube) -> None:
    """Point 11 (preRunningDeadlineSeconds) and 13 (submission-mode label): a RayJob whose cluster
    cannot be scheduled gives up instead of staying Initializing for ever."""
    rayjob = load("parity/ray-job.pre-running-deadline.yaml")
    name = rayjob["metadata"]["name"]
    rayjob["spec"]["preRunningDeadlineSeconds"] = 3
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    head["nodeSelector"] = {"rayquota.io/no-such-pool": "x"}  # never scheduled, never ready
    kube.apply(rayjob)

    def cluster_name() -> str | None:
        return ((kube.get("rayjob", name) or {}).get("status") or {}).get("rayClusterName")

    created = wait_for("the RayJob's cluster", cluster_name, 90)
    cluster = wait_for("the RayCluster", lambda: kube.get("raycluster", created), 90)
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "K8sJobMode"

    def failed() -> dict[str, Any] | None:
        status = (kube.get("rayjob", name) or {}).get("status") or {}
        return status if status.get("jobDeploymentStatus") == "Failed" else None

    status = wait_for("RayJob Failed", failed, 60)
    assert status["reason"] == "PreRunningDeadlineExceeded"


def test_k8s_job_mode_rayjob_gets_its_head_service_and_gives_up_on_an_unknown_job(kube: Kube) -> None:
    """Points 4, 5, 11: the submitter Job is KubeRay's (head image, `bash -ce`, unbuffered output),
    `<rayjob>-head-svc` belongs to the RayJob, and when the submitter has finished but the Ray job's
    status cannot be learned (no dashboard here), the RayJob fails 30 s later instead of staying
    Running for ever."""
    rayjob = load("parity/ray-job.pre-running-deadline.yaml")
    name = rayjob["metadata"]["name"]
    rayjob["spec"].pop("preRunningDeadlineSeconds")
    # Copied to the cluster: its dashboard is an address nothing listens on.
    rayjob["metadata"]["annotations"] = {"rayquota.io/dashboard-url": "http://127.0.0.1:9"}
    kube.apply(rayjob)

    job = wait_for("the submitter Job", lambda: kube.get("job", name), 90)
    container = job["spec"]["template"]["spec"]["containers"][0]
    head_image = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "image"
    ]
    assert container["image"] == head_image
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    assert {"name": "PYTHONUNBUFFERED", "value": "1"} in container["env"]
    assert "api/gcs_healthz" in container["args"][0]

    service = wait_for("<rayjob>-head-svc", lambda: kube.get("service", f"{name}-head-svc"), 60)
    rayjob_uid = kube.get("rayjob", name)["metadata"]["uid"]
    assert service["metadata"]["ownerReferences"][0]["uid"] == rayjob_uid
    cluster_name = kube.get("rayjob", name)["status"]["rayClusterName"]
    assert service["spec"]["selector"]["ray.io/cluster"] == cluster_name

    def failed() -> dict[str, Any] | None:
        status = (kube.get("rayjob", name) or {}).get("status") or {}
        return status if status.get("jobDeploymentStatus") == "Failed" else None

    status = wait_for("RayJob Failed after the submitter finished", failed, 120)
    assert status["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"
    assert status["jobStatus"] == "FAILED"
