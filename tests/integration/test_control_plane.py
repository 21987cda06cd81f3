"""The local control plane is a real Kubernetes: versions, scheduling onto fake GPU nodes, GC."""

from __future__ import annotations

import json

import yaml

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster, _alive
from tests.polling import wait_for


def test_versions_report_the_pinned_releases(control_plane: LocalCluster) -> None:
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == binaries.K8S_VERSION
    assert version["clientVersion"]["gitVersion"] == binaries.K8S_VERSION


def test_fake_nodes_are_ready_with_gpu_capacity(control_plane: LocalCluster) -> None:
    nodes = json.loads(control_plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    gpu = by_name["gpu-h100-0"]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    ready = [c for c in gpu["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"


def test_gpu_pod_lands_on_a_gpu_node_and_runs(control_plane: LocalCluster, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-pod", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"rayquota.io/gpu-pool": "h100"},
        },
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))

    def running() -> dict | None:
        body = json.loads(
            control_plane.kubectl("get", "pod", "gpu-pod", "-n", namespace, "-o", "json").stdout
        )
        return body if body.get("status", {}).get("phase") == "Running" else None

    body = wait_for("the GPU pod to run", running)
    assert body["spec"]["nodeName"].startswith("gpu-h100-")
    conditions = {c["type"]: c["status"] for c in body["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert body["status"]["podIP"]


def test_gpu_pod_without_toleration_stays_off_gpu_nodes(control_plane: LocalCluster, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-toleration", "namespace": namespace},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))

    def unschedulable() -> bool:
        body = json.loads(
            control_plane.kubectl("get", "pod", "no-toleration", "-n", namespace, "-o", "json").stdout
        )
        conds = body.get("status", {}).get("conditions", [])
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)

    wait_for("the scheduler to report Unschedulable", unschedulable)


def test_job_pods_complete(control_plane: LocalCluster, namespace: str) -> None:
    control_plane.kubectl("create", "job", "hello", "-n", namespace, "--image=busybox", "--", "true")

    def succeeded() -> bool:
        body = json.loads(control_plane.kubectl("get", "job", "hello", "-n", namespace, "-o", "json").stdout)
        return body.get("status", {}).get("succeeded") == 1

    wait_for("the Job to succeed", succeeded)


def test_garbage_collector_deletes_dependents(control_plane: LocalCluster, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "owner", "-n", namespace)
    uid = control_plane.kubectl(
        "get", "configmap", "owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}],
        },
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(dependent))
    control_plane.kubectl("delete", "configmap", "owner", "-n", namespace)

    def gone() -> bool:
        return (
            control_plane.kubectl("get", "configmap", "dependent", "-n", namespace, check=False).returncode
            != 0
        )

    wait_for("the dependent ConfigMap to be collected", gone)


def test_up_is_idempotent_and_down_leaves_nothing(control_plane: LocalCluster) -> None:
    """A second cluster next to the session's: its own ports, `up` twice keeps the same processes."""
    other = LocalCluster(name=f"{control_plane.name}-second")
    try:
        other.up(log=lambda _msg: None)
        pids = {c: info["pid"] for c, info in other.processes().items()}
        assert other.server != control_plane.server
        other.up(log=lambda _msg: None)
        assert {c: info["pid"] for c, info in other.processes().items()} == pids
    finally:
        other.down(quiet=True, purge=True)
    alive = [pid for pid in pids.values() if _alive(int(str(pid)))]
    assert alive == []
    assert control_plane.healthy()


def test_fake_nodes_hold_renewed_leases(control_plane: LocalCluster) -> None:
    """kwok renews a Lease per node, so the node lifecycle controller never marks them NotReady."""
    expected = {"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "cpu-0", "cpu-1"}

    def leases() -> dict[str, str]:
        out = control_plane.kubectl("get", "leases", "-n", "kube-node-lease", "-o", "json").stdout
        found = {i["metadata"]["name"]: i["spec"].get("renewTime", "") for i in json.loads(out)["items"]}
        return found if expected <= set(found) else {}

    first = wait_for("a lease for every fake node", leases)
    wait_for("a lease renewal", lambda: any(leases().get(n) != first[n] for n in expected), timeout_s=60)
