"""RayCluster reconciliation on the local control plane (kwok nodes play the Ray pods)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, condition, pod_names, running, wait_for

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "quickstart" / "raycluster.yaml"
NAME = "raycluster-quickstart"
GPU_NODES = {"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1"}


def sample() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(SAMPLE.read_text()))


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def wait_ready(kube: Kube, workers: int, name: str = NAME, timeout_s: float = 60.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        cluster = kube.get("raycluster", name)
        status = (cluster or {}).get("status") or {}
        pods = running(kube.pods(name))
        if (
            status.get("state") == "ready"
            and status.get("readyWorkerReplicas") == workers
            and len(pods) == workers + 1
        ):
            return cluster
        return None

    return wait_for(f"RayCluster {name} ready with {workers} workers", probe, timeout_s)


def workers_of(kube: Kube, name: str = NAME) -> list[dict[str, Any]]:
    return [p for p in kube.pods(name) if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]


def head_of(kube: Kube, name: str = NAME) -> dict[str, Any]:
    [head] = [p for p in kube.pods(name) if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    return head


def test_sample_cluster_runs_with_services_status_and_events(kube: Kube, namespace: str) -> None:
    kube.apply(sample())
    cluster = wait_ready(kube, workers=2)

    head = head_of(kube)
    assert head["metadata"]["labels"]["ray.io/group"] == "headgroup"
    assert head["metadata"]["labels"]["ray.io/identifier"] == f"{NAME}-head"
    assert head["metadata"]["labels"]["app.kubernetes.io/created-by"] == "kuberay-operator"
    assert head["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]
    assert head["metadata"]["annotations"]["ray.io/kuberay-version"] == "test-1"
    assert "ray start --head" in head["spec"]["containers"][0]["args"][0]
    for worker in workers_of(kube):
        assert worker["spec"]["nodeName"] in GPU_NODES  # one nvidia.com/gpu each: GPU nodes only
        assert worker["metadata"]["labels"]["ray.io/group"] == "gpu-workers"
        assert "--num-gpus=1" in worker["spec"]["containers"][0]["args"][0]

    service = kube.get("service", f"{NAME}-head-svc")
    assert service is not None
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080, "serve": 8000}
    assert service["spec"]["selector"] == {
        "ray.io/cluster": NAME,
        "ray.io/node-type": "head",
        "ray.io/identifier": f"{NAME}-head",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
    }

    status = cluster["status"]
    assert status["desiredWorkerReplicas"] == 2 and status["availableWorkerReplicas"] == 2
    assert (status.get("minWorkerReplicas"), status["maxWorkerReplicas"]) == (None, 4)  # 0 is omitted
    # From requests (KubeRay's columns): head 1 CPU / 2Gi + 2 workers x 4 CPU / 16Gi.
    assert (status["desiredCPU"], status["desiredMemory"], status["desiredGPU"]) == ("9", "34Gi", "2")
    assert status["head"]["podName"] == head["metadata"]["name"]
    assert status["head"]["podIP"] == head["status"]["podIP"]
    # The head Service is headless: KubeRay's HEAD SERVICE IP column shows the pod IP.
    assert service["spec"]["clusterIP"] == "None"
    assert status["head"]["serviceIP"] == head["status"]["podIP"]
    assert status["endpoints"]["dashboard"] == "8265"
    assert status["observedGeneration"] == cluster["metadata"]["generation"]
    assert condition(cluster, "HeadPodReady")["status"] == "True"
    assert condition(cluster, "RayClusterProvisioned")["status"] == "True"
    assert condition(cluster, "ReplicaFailure") is None

    events = kube.events_once(NAME, lambda es: [e["reason"] for e in es].count("CreatedWorkerPod") >= 2)
    reasons = [e["reason"] for e in events]
    assert reasons.count("CreatedHeadPod") == 1 and reasons.count("CreatedWorkerPod") == 2


def test_scaling_workers_to_delete_and_self_healing(kube: Kube) -> None:
    kube.apply(sample())
    wait_ready(kube, workers=2)

    kube.patch(
        "raycluster",
        NAME,
        {"spec": {"workerGroupSpecs": [{**sample()["spec"]["workerGroupSpecs"][0], "replicas": 3}]}},
    )
    wait_ready(kube, workers=3)

    # replicas above maxReplicas are clamped to it.
    kube.patch(
        "raycluster",
        NAME,
        {"spec": {"workerGroupSpecs": [{**sample()["spec"]["workerGroupSpecs"][0], "replicas": 9}]}},
    )
    wait_ready(kube, workers=4)
    assert kube.get("raycluster", NAME)["status"]["desiredWorkerReplicas"] == 4

    victim, *keep = sorted(pod_names(workers_of(kube)))
    group = {
        **sample()["spec"]["workerGroupSpecs"][0],
        "replicas": 3,
        "scaleStrategy": {"workersToDelete": [victim]},
    }
    kube.patch("raycluster", NAME, {"spec": {"workerGroupSpecs": [group]}})
    wait_ready(kube, workers=3)
    assert pod_names(workers_of(kube)) == set(keep)
    # Left as written, as KubeRay does: clearing it would be a spec write GitOps tools see as drift.
    scale_strategy = kube.get("raycluster", NAME)["spec"]["workerGroupSpecs"][0]["scaleStrategy"]
    assert scale_strategy["workersToDelete"] == [victim]

    # A deleted worker and a deleted head are both replaced.
    lost_worker = sorted(keep)[0]
    old_head = head_of(kube)["metadata"]["name"]
    kube.kubectl("delete", "pod", lost_worker, old_head, "--wait=false")
    wait_for(
        "replacements",
        lambda: (
            len(running(workers_of(kube))) == 3
            and lost_worker not in pod_names(kube.pods(NAME))
            and old_head not in pod_names(kube.pods(NAME))
            and head_of(kube)
        ),
    )
    kube.reasons_once(NAME, {"DeletedWorkerPod"})


def test_suspend_and_resume(kube: Kube) -> None:
    kube.apply(sample())
    wait_ready(kube, workers=2)

    kube.patch("raycluster", NAME, {"spec": {"suspend": True}})
    cluster = wait_for(
        "suspended",
        lambda: (
            (c := kube.get("raycluster", NAME))
            and (condition(c, "RayClusterSuspended") or {}).get("status") == "True"
            and c
        ),
    )
    assert kube.pods(NAME) == [] and kube.list("pods") == []
    assert cluster["status"]["state"] == "suspended"
    assert condition(cluster, "RayClusterSuspending")["status"] == "False"
    # KubeRay reports what the spec asks for while suspended.
    assert cluster["status"]["desiredWorkerReplicas"] == 2
    deletions = {"DeletedWorkerPod", "DeletedHeadPod"}
    events = kube.events_once(NAME, lambda es: deletions <= {e["reason"] for e in es})
    reasons = [e["reason"] for e in events]
    assert reasons.count("DeletedWorkerPod") == 2 and reasons.count("DeletedHeadPod") == 1
    # No pod left: it says it is suspended, not that pods are being removed.
    assert_suspended_with_no_pods(wait_for("the last status", lambda: settled_status(kube, NAME)))

    kube.patch("raycluster", NAME, {"spec": {"suspend": False}})
    cluster = wait_ready(kube, workers=2)
    assert condition(cluster, "RayClusterSuspended")["status"] == "False"


def settled_status(kube: Kube, name: str) -> dict[str, Any] | None:
    """The cluster once its status says suspended and no pod of it is left, terminating or not."""
    cluster = kube.get("raycluster", name)
    status = (cluster or {}).get("status") or {}
    if status.get("state") != "suspended" or kube.list("pods", f"ray.io/cluster={name}"):
        return None
    return cluster


def assert_suspended_with_no_pods(cluster: dict[str, Any]) -> None:
    provisioned = condition(cluster, "RayClusterProvisioned") or {}
    assert provisioned.get("status") == "False", provisioned
    assert "being removed" not in str(provisioned.get("message")), provisioned
    assert "suspended" in str(provisioned.get("message")), provisioned
    assert (condition(cluster, "RayClusterSuspended") or {}).get("status") == "True"


def test_a_cluster_created_suspended_says_it_is_suspended(kube: Kube) -> None:
    body = sample()
    body["spec"]["suspend"] = True
    kube.apply(body)
    assert_suspended_with_no_pods(wait_for("suspended", lambda: settled_status(kube, NAME)))
    assert kube.list("pods") == []


def test_deletion_cascades_to_pods_and_services(kube: Kube) -> None:
    kube.apply(sample())
    wait_ready(kube, workers=2)
    kube.kubectl("delete", "raycluster", NAME, "--wait=false")
    wait_for(
        "pods and services garbage-collected",
        lambda: not kube.list("pods") and not kube.list("services") and kube.get("raycluster", NAME) is None,
        timeout_s=90,
    )


def test_recreate_strategy(kube: Kube) -> None:
    kube.apply(sample())
    wait_ready(kube, workers=2)
    before = pod_names(kube.pods(NAME))
    head = head_of(kube)["metadata"]["name"]

    # A replicas change never restarts pods.
    kube.patch(
        "raycluster",
        NAME,
        {"spec": {"workerGroupSpecs": [{**sample()["spec"]["workerGroupSpecs"][0], "replicas": 3}]}},
    )
    wait_ready(kube, workers=3)
    assert before <= pod_names(kube.pods(NAME))

    # An operator-version change (pods stamped by another version, with that version's hash)
    # re-stamps the annotations and restarts nothing.
    kube.kubectl(
        "annotate",
        "pod",
        head,
        "--overwrite",
        "ray.io/kuberay-version=0.0.1-old",
        "ray.io/hash-without-replicas-and-workers-to-delete=hash-of-old-operator",
    )
    wait_for(
        "head re-stamped",
        lambda: kube.get("pod", head)["metadata"]["annotations"]["ray.io/kuberay-version"] == "test-1",
    )
    stamped = kube.get("pod", head)["metadata"]["annotations"][
        "ray.io/hash-without-replicas-and-workers-to-delete"
    ]
    assert stamped != "hash-of-old-operator"
    steady = pod_names(kube.pods(NAME))
    assert before <= steady and len(steady) == 4

    # An image change recreates every pod.
    changed = sample()
    changed["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    changed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.42.0"
    kube.apply(changed)
    wait_for(
        "every pod replaced",
        lambda: (pods := running(kube.pods(NAME))) and len(pods) == 4 and not (pod_names(pods) & steady),
        timeout_s=90,
    )
    wait_ready(kube, workers=3)
    new_head = head_of(kube)
    assert new_head["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
    assert (
        new_head["metadata"]["annotations"]["ray.io/hash-without-replicas-and-workers-to-delete"] != stamped
    )


def test_upgrade_strategy_rejected_on_a_rayjob_cluster(kube: Kube) -> None:
    manifest = sample()
    manifest["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayJob"}
    kube.apply(manifest)
    cluster = wait_for(
        "ValidationFailed condition",
        lambda: (c := kube.get("raycluster", NAME)) and condition(c, "ReplicaFailure") and c,
    )
    failure = condition(cluster, "ReplicaFailure")
    assert failure["status"] == "True" and failure["reason"] == "ValidationFailed"
    assert "upgradeStrategy" in failure["message"]
    events = [e for e in kube.events(NAME) if e["reason"] == "InvalidRayClusterSpec"]
    assert events and events[0]["type"] == "Warning"
    assert kube.pods(NAME) == []


def test_autoscaling_cluster_gets_sidecar_and_rbac(kube: Kube) -> None:
    manifest = sample()
    manifest["spec"]["enableInTreeAutoscaling"] = True
    manifest["spec"]["autoscalerOptions"] = {"upscalingMode": "Default", "idleTimeoutSeconds": 60}
    kube.apply(manifest)
    wait_ready(kube, workers=2)
    head = head_of(kube)
    assert [c["name"] for c in head["spec"]["containers"]] == ["ray-head", "autoscaler"]
    assert head["spec"]["serviceAccountName"] == NAME
    assert kube.get("serviceaccount", NAME) is not None
    role = kube.get("role", NAME)
    assert role is not None and any("rayclusters" in r["resources"] for r in role["rules"])
    binding = kube.get("rolebinding", NAME)
    assert binding is not None and binding["subjects"][0]["name"] == NAME


def test_multi_host_group_replaces_whole_replicas(kube: Kube) -> None:
    manifest = sample()
    manifest["spec"]["workerGroupSpecs"][0].update(replicas=1, numOfHosts=2)
    kube.apply(manifest)
    wait_ready(kube, workers=2)
    [replica] = {p["metadata"]["labels"]["ray.io/worker-group-replica-name"] for p in workers_of(kube)}
    hosts = sorted(p["metadata"]["labels"]["ray.io/replica-host-index"] for p in workers_of(kube))
    assert hosts == ["0", "1"]

    lost = workers_of(kube)[0]["metadata"]["name"]
    kube.kubectl("delete", "pod", lost, "--wait=false")

    def replaced() -> set[str]:
        workers = running(workers_of(kube))
        names = {p["metadata"]["labels"]["ray.io/worker-group-replica-name"] for p in workers}
        return names if len(workers) == 2 and len(names) == 1 and replica not in names else set()

    wait_for("a whole new replica", replaced)


def test_cluster_managed_by_another_controller_is_left_alone(kube: Kube) -> None:
    """spec.managedBy naming another controller (MultiKueue) means hands off, as in KubeRay: no
    pods, no status, and not even a finalizer or an annotation on the object."""
    foreign = sample()
    foreign["metadata"]["name"] = "managed-elsewhere"
    foreign["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    # `create` (unlike `apply`) adds no annotation of kubectl's, and returns the stored version.
    created = json.loads(
        kube.kubectl("create", "-f", "-", "-o", "json", input=yaml.safe_dump(foreign)).stdout
    )
    ours = sample()
    ours["spec"]["managedBy"] = "ray.io/kuberay-operator"
    kube.apply(ours)
    # The watch delivers events in order and the queue hands keys out in order, so by the time the
    # cluster created second is ready, the operator has had the foreign one in hand.
    wait_ready(kube, workers=2)
    stored = kube.get("raycluster", "managed-elsewhere")
    assert stored is not None
    assert kube.pods("managed-elsewhere") == []
    assert not stored.get("status")
    assert stored["metadata"].get("finalizers", []) == []
    assert stored["metadata"].get("annotations", {}) == {}
    # Nothing at all was written to it (a finalizer, an annotation or a status would each bump this).
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert not [s for s in kube.list("services") if s["metadata"]["name"].startswith("managed-elsewhere")]
