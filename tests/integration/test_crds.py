"""The generated CRDs on a real API server: established, rejecting malformed objects with a message
that names the field, and printing the columns users expect."""

from __future__ import annotations

import copy
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.api.crdgen import ALL_KINDS
from tests.polling import wait_for

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _sample(name: str, namespace: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    doc["metadata"]["namespace"] = namespace
    return doc


def _create(control_plane: Any, doc: dict[str, Any]) -> Any:
    return control_plane.kubectl("create", "-f", "-", input=json.dumps(doc), check=False)


def _cluster_queue(name: str, resources: list[dict[str, Any]], cohort: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": [r["name"] for r in resources],
                "flavors": [{"name": "a100", "resources": resources}],
            }
        ]
    }
    if cohort:
        spec["cohort"] = cohort
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_every_crd_is_established(control_plane: Any, crds_installed: None) -> None:
    for kind in ALL_KINDS:
        name = f"{kind.crd.plural}.{kind.crd.group}"
        status = control_plane.kubectl(
            "get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}"
        ).stdout
        assert status == "True", name


def _rejection(control_plane: Any, doc: dict[str, Any]) -> str:
    result = _create(control_plane, doc)
    assert result.returncode != 0, f"accepted: {json.dumps(doc)[:300]}"
    return str(result.stderr)


@pytest.mark.parametrize("bad", ["ten", "5Gb", "1.2.3"])
def test_bad_quantity_is_rejected(control_plane: Any, crds_installed: None, namespace: str, bad: str) -> None:
    doc = _cluster_queue(f"bad-q-{namespace}"[:63], [{"name": "nvidia.com/gpu", "nominalQuota": bad}])
    err = _rejection(control_plane, doc)
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in err


@pytest.mark.parametrize("negative", ["-1", -4, "-500m"])
def test_negative_quota_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str, negative: object
) -> None:
    doc = _cluster_queue(f"neg-q-{namespace}"[:63], [{"name": "cpu", "nominalQuota": negative}])
    err = _rejection(control_plane, doc)
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in err


def test_borrowing_limit_without_cohort_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    resources = [{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 4}]
    err = _rejection(control_plane, _cluster_queue(f"nocohort-{namespace}"[:63], resources))
    assert "borrowingLimit" in err and "cohort" in err
    lending = [{"name": "cpu", "nominalQuota": 8, "lendingLimit": 4}]
    err = _rejection(control_plane, _cluster_queue(f"nocohort-{namespace}"[:63], lending))
    assert "lendingLimit" in err
    # The same limits are fine once the queue is in a cohort.
    name = f"withcohort-{namespace}"[:63]
    ok = _create(control_plane, _cluster_queue(name, resources, cohort="research"))
    assert ok.returncode == 0, ok.stderr
    control_plane.kubectl("delete", "clusterqueue.rayquota.io", name, "--wait=false")


def test_unknown_upgrade_strategy_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = _sample("ray-service.new-cluster.yaml", namespace)
    doc["spec"]["upgradeStrategy"]["type"] = "BlueGreen"
    err = _rejection(control_plane, doc)
    assert "spec.upgradeStrategy.type" in err and "Unsupported value" in err
    cluster = _sample("ray-cluster.complete.yaml", namespace)
    cluster["spec"]["upgradeStrategy"] = {"type": "Rolling"}
    err = _rejection(control_plane, cluster)
    assert "spec.upgradeStrategy.type" in err


def test_step_size_above_max_surge_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = _sample("ray-service.incremental-upgrade.yaml", namespace)
    doc["spec"]["upgradeStrategy"]["clusterUpgradeOptions"]["stepSizePercent"] = 60
    err = _rejection(control_plane, doc)
    assert "stepSizePercent" in err and "maxSurgePercent" in err


def test_ray_cluster_without_head_group_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = _sample("ray-cluster.complete.yaml", namespace)
    del doc["spec"]["headGroupSpec"]
    err = _rejection(control_plane, doc)
    assert "spec.headGroupSpec" in err and "Required value" in err


def test_worker_group_without_name_is_rejected(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = _sample("ray-cluster.complete.yaml", namespace)
    del doc["spec"]["workerGroupSpecs"][1]["groupName"]
    err = _rejection(control_plane, doc)
    assert "spec.workerGroupSpecs[1].groupName" in err and "Required value" in err
    # Nested in a RayJob the same rule holds.
    job = _sample("ray-job.k8s-job-mode.yaml", namespace)
    del job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"]
    err = _rejection(control_plane, job)
    assert "spec.rayClusterSpec.workerGroupSpecs[0].groupName" in err


def test_a_pod_template_is_validated_with_kubernetes_schema(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    """Inside a pod template the API server checks Kubernetes' own schema, as under KubeRay's
    CRDs: a wrong type or a missing required field is refused naming its full path."""
    doc = _sample("ray-cluster.complete.yaml", namespace)
    doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "six"
    err = _rejection(control_plane, doc)
    assert "spec.headGroupSpec.template.spec.containers[0].ports[0].containerPort" in err
    assert "must be of type integer" in err
    job = _sample("ray-job.k8s-job-mode.yaml", namespace)
    del job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["name"]
    err = _rejection(control_plane, job)
    assert "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].name" in err
    assert "Required value" in err
    service = _sample("ray-cluster.complete.yaml", namespace)
    service["spec"]["headGroupSpec"]["headService"] = {"spec": {"ports": [{"port": "http"}]}}
    err = _rejection(control_plane, service)
    assert "spec.headGroupSpec.headService.spec.ports[0].port" in err


def test_kuberays_defaults_are_applied_and_kubernetes_fields_kept(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    """KubeRay's defaults (a port's protocol, a worker group's priority) are written by the API
    server, and fields of Kubernetes types that were pruned before (resource claims) are kept."""
    doc = _sample("ray-cluster.complete.yaml", namespace)
    claims = [{"name": "gpu-claim"}]
    doc["spec"]["autoscalerOptions"]["resources"]["claims"] = claims
    doc["spec"]["autoscalerOptions"]["securityContext"] = {"runAsNonRoot": True}
    assert _create(control_plane, doc).returncode == 0
    stored = json.loads(
        control_plane.kubectl(
            "get", "rayclusters.ray.io", doc["metadata"]["name"], "-n", namespace, "-o", "json"
        ).stdout
    )
    ports = stored["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
    assert {port["protocol"] for port in ports} == {"TCP"}
    assert all(group["priority"] == 0 for group in stored["spec"]["workerGroupSpecs"])
    assert stored["spec"]["autoscalerOptions"]["resources"]["claims"] == claims
    assert stored["spec"]["autoscalerOptions"]["securityContext"] == {"runAsNonRoot": True}
    explained = control_plane.kubectl(
        "explain", "rayclusters.ray.io.spec.headGroupSpec.template.spec.containers.securityContext"
    ).stdout
    assert "runAsNonRoot" in explained


def test_min_replicas_above_max_is_rejected(control_plane: Any, crds_installed: None, namespace: str) -> None:
    doc = _sample("ray-cluster.complete.yaml", namespace)
    doc["spec"]["workerGroupSpecs"][0].update(minReplicas=5, maxReplicas=2)
    err = _rejection(control_plane, doc)
    assert "minReplicas" in err and "maxReplicas" in err


def test_deletion_rule_needs_exactly_one_condition(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = _sample("ray-job.http-mode.yaml", namespace)
    doc["spec"]["deletionStrategy"]["deletionRules"][0]["condition"]["jobDeploymentStatus"] = "Failed"
    err = _rejection(control_plane, doc)
    assert "deletionRules[0].condition" in err


def test_workload_pod_set_needs_template_or_requests(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    workload = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": namespace},
        "spec": {"queueName": "team-a", "podSets": [{"name": "workers", "count": 2}]},
    }
    err = _rejection(control_plane, workload)
    assert "spec.podSets[0]" in err and "template or requests" in err
    good = copy.deepcopy(workload)
    good["spec"]["podSets"][0]["requests"] = {"cpu": "2", "nvidia.com/gpu": 1}
    assert _create(control_plane, good).returncode == 0


def _header(output: str) -> list[str]:
    return [h for h in output.splitlines()[0].split("  ") if h.strip()]


def _server_table(control_plane: Any, path: str) -> dict[str, Any]:
    """The API server's Table for `path` (what `kubectl get -o wide` prints), each row with the
    object it was computed from: cells and object come from one read, so they always agree."""
    config = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    server = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=server["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    request = urllib.request.Request(
        f"{server['server']}{path}?includeObject=Object",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        table: dict[str, Any] = json.load(response)
    return table


def test_printer_columns_for_queues(control_plane: Any, crds_installed: None, namespace: str) -> None:
    kubectl = control_plane.kubectl
    name = f"cols-{namespace}"[:63]
    assert (
        _create(
            control_plane, _cluster_queue(name, [{"name": "cpu", "nominalQuota": 4}], "research")
        ).returncode
        == 0
    )
    status = {
        "status": {
            "pendingWorkloads": 3,
            "admittedWorkloads": 2,
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "ok",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }

    def row_with_our_status() -> dict[str, Any] | None:
        # A ClusterQueue is cluster-scoped, so a queue operator running in this session owns its
        # status and rewrites it; write ours and read the table until one read shows it.
        kubectl(
            "patch",
            "clusterqueue.rayquota.io",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
        table = _server_table(control_plane, f"/apis/rayquota.io/v1alpha1/clusterqueues/{name}")
        row: dict[str, Any] = table["rows"][0]
        shown = row["object"].get("status") or {}
        if (shown.get("pendingWorkloads"), shown.get("admittedWorkloads")) != (3, 2):
            return None
        return {"columns": [c["name"] for c in table["columnDefinitions"]], **row}

    try:
        row = wait_for("the ClusterQueue's table row with the status we wrote", row_with_our_status)
        assert row["columns"] == [
            "Name",
            "Cohort",
            "Strategy",
            "Pending Workloads",
            "Admitted Workloads",
            "Active",
            "Age",
        ]
        assert row["cells"][:6] == [name, "research", "BestEffortFIFO", 3, 2, "True"]
        out = kubectl("get", "clusterqueues.rayquota.io", name, "-o", "wide").stdout
        assert [h.strip() for h in _header(out)] == [
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING WORKLOADS",
            "ADMITTED WORKLOADS",
            "ACTIVE",
            "AGE",
        ]
    finally:
        kubectl("delete", "clusterqueue.rayquota.io", name, "--wait=false", check=False)

    lq = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": name},
    }
    assert _create(control_plane, lq).returncode == 0
    out = kubectl("get", "localqueues.rayquota.io", "-n", namespace, "-o", "wide").stdout
    assert [h.strip() for h in _header(out)] == [
        "NAME",
        "CLUSTERQUEUE",
        "PENDING WORKLOADS",
        "ADMITTED WORKLOADS",
        "AGE",
    ]
    assert out.splitlines()[1].split()[:2] == ["lq", name]

    wl = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": namespace},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "requests": {"cpu": 1}}]},
    }
    assert _create(control_plane, wl).returncode == 0
    kubectl(
        "patch",
        "workload.rayquota.io",
        "wl",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"admission": {"clusterQueue": name, "podSetAssignments": []}}}),
    )
    out = kubectl("get", "workloads.rayquota.io", "-n", namespace, "-o", "wide").stdout
    assert [h.strip() for h in _header(out)] == ["NAME", "QUEUE", "ADMITTED BY", "AGE"]
    assert out.splitlines()[1].split()[:3] == ["wl", "lq", name]


def test_printer_columns_for_ray_kinds(control_plane: Any, crds_installed: None, namespace: str) -> None:
    kubectl = control_plane.kubectl
    for sample in ("ray-cluster.complete.yaml", "ray-job.http-mode.yaml", "ray-service.no-upgrade.yaml"):
        assert _create(control_plane, _sample(sample, namespace)).returncode == 0
    kubectl(
        "patch",
        "rayclusters.ray.io",
        "raycluster-complete",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(
            {
                "status": {
                    "desiredWorkerReplicas": 3,
                    "availableWorkerReplicas": 1,
                    "desiredGPU": "4",
                    "state": "ready",
                }
            }
        ),
    )
    out = kubectl("get", "rayclusters.ray.io", "-n", namespace, "-o", "wide").stdout
    assert [h.strip() for h in _header(out)] == [
        "NAME",
        "DESIRED WORKERS",
        "AVAILABLE WORKERS",
        "CPUS",
        "MEMORY",
        "GPUS",
        "TPUS",  # -o wide only, as KubeRay's
        "STATUS",
        "AGE",
        "HEAD POD IP",
        "HEAD SERVICE IP",
    ]
    row = out.splitlines()[1].split()
    assert row[:3] == ["raycluster-complete", "3", "1"] and "4" in row and "ready" in row
    out = kubectl("get", "rayjobs.ray.io", "-n", namespace).stdout
    assert [h.strip() for h in _header(out)] == [
        "NAME",
        "JOB STATUS",
        "DEPLOYMENT STATUS",
        "RAY CLUSTER NAME",
        "START TIME",
        "END TIME",
        "AGE",
    ]
    out = kubectl("get", "rayservices.ray.io", "-n", namespace).stdout
    assert [h.strip() for h in _header(out)] == ["NAME", "SERVICE STATUS", "NUM SERVE ENDPOINTS", "AGE"]
