"""KubeRay in production (issue 34) on the local control plane, with the operator running without
its admission webhooks: security fields refused by the reconcilers, ValidationFailed terminal,
KubeRay's CRD rules, a custom head Service name, and objects carrying KubeRay's finalizers."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, condition, running, wait_for

CONTAINER = {"image": "rayproject/ray:2.41.0", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
CLUSTER_SPEC: dict[str, Any] = {
    "rayVersion": "2.41.0",
    "headGroupSpec": {
        "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", **CONTAINER}]}},
    },
    "workerGroupSpecs": [
        {
            "groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", **CONTAINER}]}},
        }
    ],
}  # fmt: skip


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def raycluster(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {**copy.deepcopy(CLUSTER_SPEC), **spec},
    }


def rayjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": copy.deepcopy(CLUSTER_SPEC), **spec},
    }


def warning(kube: Kube, name: str, reason: str) -> str:
    def found() -> str | None:
        messages = [
            e["message"] for e in kube.events(name) if e["reason"] == reason and e["type"] == "Warning"
        ]
        return messages[0] if messages else None

    return wait_for(f"a {reason} Warning event on {name}", found, 60)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("networkPolicy", {"mode": "DenyAllIngress"}, "NetworkPolicies"),
        ("tlsOptions", {"enabled": True}, "mutual TLS"),
        ("historyServerOptions", {"collectorOptions": {}}, "history server collector"),
    ],
    ids=["networkPolicy", "tlsOptions", "historyServerOptions"],
)
def test_a_raycluster_asking_for_security_it_would_not_get_is_refused_by_the_reconciler(
    kube: Kube, field: str, value: dict[str, Any], why: str
) -> None:
    """With KubeRay's default feature gates (and no webhook), each field is refused naming the
    field and its value, and nothing of the cluster is made."""
    name = field.lower()
    kube.apply(raycluster(name, **{field: value}))
    refused = f"spec.{field} is refused (set to {json.dumps(value, sort_keys=True)})"
    message = warning(kube, name, "InvalidRayClusterSpec")
    assert refused in message and why in message, message

    def failed() -> dict[str, Any] | None:
        cluster = kube.get("raycluster", name) or {}
        found = condition(cluster, "ReplicaFailure")
        return found if found and found.get("reason") == "ValidationFailed" else None

    assert refused in wait_for("ReplicaFailure ValidationFailed", failed, 60)["message"]
    assert kube.pods(name) == []
    assert kube.list("services", f"ray.io/cluster={name}") == []


def test_a_rayservice_asking_for_kubernetes_token_auth_is_refused_by_the_reconciler(kube: Kube) -> None:
    spec = copy.deepcopy(CLUSTER_SPEC)
    spec["rayVersion"] = "2.60.0"
    spec["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True}
    kube.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "k8s-auth-svc"},
            "spec": {"rayClusterConfig": spec},
        }
    )
    message = warning(kube, "k8s-auth-svc", "InvalidRayServiceSpec")
    assert "spec.rayClusterConfig.authOptions.enableK8sTokenAuth: true is refused" in message, message
    assert "KubeRay does not support Kubernetes token auth for a RayService" in message, message
    assert kube.list("rayclusters") == []


def test_a_rayjob_asking_for_kubernetes_token_auth_is_refused_by_the_reconciler(kube: Kube) -> None:
    spec = copy.deepcopy(CLUSTER_SPEC)
    spec["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True}
    kube.apply(rayjob("k8s-auth", rayClusterSpec=spec, shutdownAfterJobFinishes=True))
    message = warning(kube, "k8s-auth", "InvalidRayJobSpec")
    assert "spec.rayClusterSpec.authOptions.enableK8sTokenAuth: true is refused" in message, message
    status = wait_for(
        "ValidationFailed",
        lambda: (s := (kube.get("rayjob", "k8s-auth") or {}).get("status") or {})
        and s.get("jobDeploymentStatus") == "ValidationFailed"
        and s,
        60,
    )
    assert "enableK8sTokenAuth" in status["message"]
    assert kube.list("rayclusters") == []


def test_validation_failed_is_terminal_as_in_kuberay(kube: Kube) -> None:
    """Suspended without shutdownAfterJobFinishes: ValidationFailed on both operators; resumed,
    KubeRay keeps it ValidationFailed, and so do we (before: it ran)."""
    kube.apply(rayjob("stays-failed", suspend=True))
    status = wait_for(
        "ValidationFailed",
        lambda: (
            (s := (kube.get("rayjob", "stays-failed") or {}).get("status") or {})
            and s.get("jobDeploymentStatus") == "ValidationFailed"
            and s
        ),
        60,
    )
    assert "shutdownAfterJobFinishes" in status["message"]
    kube.patch("rayjob", "stays-failed", {"spec": {"suspend": False}})

    def seen() -> dict[str, Any] | None:
        body = kube.get("rayjob", "stays-failed") or {}
        status = body.get("status") or {}
        generation = body["metadata"]["generation"]
        return status if generation > 1 and status.get("observedGeneration") == generation else None

    after = wait_for("the resumed spec observed", seen, 60)
    assert after["jobDeploymentStatus"] == "ValidationFailed"
    assert after["reason"] == "ValidationFailed"
    assert kube.list("rayclusters") == []


def test_a_legacy_deletion_strategy_with_shutdown_runs_as_in_kuberay(kube: Kube) -> None:
    strategy = {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteCluster"}}
    kube.apply(rayjob("legacy", shutdownAfterJobFinishes=True, deletionStrategy=strategy))
    name = wait_for(
        "its cluster",
        lambda: ((kube.get("rayjob", "legacy") or {}).get("status") or {}).get("rayClusterName"),
        60,
    )
    wait_for("its cluster exists", lambda: kube.get("raycluster", name), 60)
    status = (kube.get("rayjob", "legacy") or {}).get("status") or {}
    assert status.get("jobDeploymentStatus") != "ValidationFailed", status


def test_a_custom_head_service_name_is_the_one_made_and_reported(kube: Kube) -> None:
    head = copy.deepcopy(CLUSTER_SPEC["headGroupSpec"])
    head["headService"] = {"metadata": {"name": "custom-head"}}
    kube.apply(raycluster("named", headGroupSpec=head))

    def ready() -> dict[str, Any] | None:
        cluster = kube.get("raycluster", "named") or {}
        state = (cluster.get("status") or {}).get("state")
        return cluster if state == "ready" and len(running(kube.pods("named"))) == 2 else None

    cluster = wait_for("RayCluster named ready", ready, 90)
    assert cluster["status"]["head"]["serviceName"] == "custom-head"
    assert kube.get("service", "custom-head") is not None
    [worker] = [p for p in kube.pods("named") if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert env["FQ_RAY_IP"] == f"custom-head.{kube.ns}.svc.cluster.local"
    assert env["RAY_IP"] == "custom-head"


@pytest.mark.parametrize(
    ("kind", "body", "message"),
    [
        ("RayCluster", {"managedBy": "someone-else"}, "the managedBy field value must be either"),
        ("RayJob", {"managedBy": "someone-else"}, "the managedBy field value must be either"),
    ],
)
def test_kuberays_crd_rules_refuse_a_foreign_managed_by(
    kube: Kube, kind: str, body: dict[str, Any], message: str
) -> None:
    manifest = raycluster("managed", **body) if kind == "RayCluster" else rayjob("managed", **body)
    result = kube.kubectl("apply", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_managed_by_and_the_gcs_backend_are_immutable(kube: Kube) -> None:
    manifest = raycluster(
        "immutable",
        managedBy="kueue.x-k8s.io/multikueue",
        gcsFaultToleranceOptions={"backend": "redis", "redisAddress": "redis:6379"},
    )
    kube.apply(manifest)
    changed = kube.kubectl(
        "patch", "raycluster", "immutable", "--type", "merge",
        "-p", json.dumps({"spec": {"managedBy": "ray.io/kuberay-operator"}}), check=False,
    )  # fmt: skip
    assert changed.returncode != 0 and "the managedBy field is immutable" in changed.stderr, changed.stderr
    changed = kube.kubectl(
        "patch", "raycluster", "immutable", "--type", "merge",
        "-p", json.dumps({"spec": {"gcsFaultToleranceOptions": {"backend": "rocksdb"}}}), check=False,
    )  # fmt: skip
    assert changed.returncode != 0 and "gcsFaultToleranceOptions.backend is immutable" in changed.stderr


def deleted(kube: Kube, kind: str, name: str) -> None:
    kube.kubectl("delete", kind, name, "--wait=false")
    wait_for(f"{kind} {name} gone", lambda: kube.get(kind, name) is None, 90)


def test_objects_carrying_kuberays_finalizers_are_deleted(kube: Kube) -> None:
    """Objects created under KubeRay carry its finalizers: deleting each completes under rayquota
    (KubeRay's operator is not needed to put them there)."""
    service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "migrated", "finalizers": ["ray.io/rayservice-finalizer"]},
        "spec": {"serveConfigV2": "applications: []\n", "rayClusterConfig": copy.deepcopy(CLUSTER_SPEC)},
    }
    kube.apply(service)
    wait_for(
        "the RayService's cluster",
        lambda: kube.list("rayclusters", "ray.io/originated-from-crd=RayService"),
        60,
    )

    job = rayjob("migrated-job", shutdownAfterJobFinishes=True)
    job["metadata"]["finalizers"] = ["ray.io/rayjob-finalizer"]
    kube.apply(job)
    wait_for(
        "the RayJob's cluster",
        lambda: ((kube.get("rayjob", "migrated-job") or {}).get("status") or {}).get("rayClusterName"),
        60,
    )

    cluster = raycluster("migrated-cluster")
    cluster["metadata"]["finalizers"] = ["ray.io/gcs-ft-redis-cleanup-finalizer"]  # GCS FT is off here
    kube.apply(cluster)
    wait_for("the cluster's head", lambda: kube.pods("migrated-cluster"), 60)

    deleted(kube, "rayservice", "migrated")
    deleted(kube, "rayjob", "migrated-job")
    deleted(kube, "raycluster", "migrated-cluster")
