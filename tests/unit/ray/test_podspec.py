from __future__ import annotations

import json
import shlex

import pytest

from rayquota.operator.ray.builders import ray_start
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.vocabulary import labels
from tests.unit.ray.fixtures import cluster


def ctx(body: dict | None = None) -> PodContext:
    return PodContext(cluster=body or cluster(), operator_version="9.9.9", spec_hash="h1")


def env_of(container: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def start_flags(container: dict) -> dict[str, str]:
    args = container["args"][0]
    generated = args.rsplit("&& ", 1)[-1]
    assert generated.startswith("ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start")
    flags = {}
    for token in shlex.split(generated.split(";", 1)[1])[2:]:
        key, _, value = token.removeprefix("--").partition("=")
        flags[key] = value or "true"
    return flags


def test_head_pod_labels_names_and_owner() -> None:
    pod = build_head_pod(ctx())
    meta = pod["metadata"]
    assert meta["name"].startswith("demo-head-") and len(meta["name"]) == len("demo-head-") + 5
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "team": "a",
        "ray.io/cluster": "demo",
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/is-ray-node": "yes",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
    }
    assert meta["annotations"][labels.HASH_ANNOTATION] == "h1"
    assert meta["annotations"][labels.OPERATOR_VERSION_ANNOTATION] == "9.9.9"
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "demo",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_head_ray_start_derives_resources_from_limits() -> None:
    container = build_head_pod(ctx())["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-c", "--"]
    assert "--head" in container["args"][0]
    flags = start_flags(container)
    assert flags["num-cpus"] == "2"  # limit wins over request
    assert flags["memory"] == str(4 * 1024**3)
    assert "num-gpus" not in flags
    assert flags["dashboard-host"] == "0.0.0.0"
    assert flags["metrics-export-port"] == "8080"
    assert flags["block"] == "true"
    assert "no-monitor" not in flags
    # Like KubeRay, only the metrics port is added to the container; the Service has the defaults.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080}


def test_head_env_matches_kuberay() -> None:
    container = build_head_pod(ctx())["spec"]["containers"][0]
    env = env_of(container)
    assert env["RAY_ADDRESS"] == "127.0.0.1:6379"
    assert env["RAY_PORT"] == "6379"
    assert "RAY_IP" not in env  # workers only, as KubeRay
    assert env["RAY_CLUSTER_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}
    assert env["RAY_CLOUD_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["RAY_NODE_TYPE_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/group']"}}
    assert env["RAY_USAGE_STATS_EXTRA_TAGS"] == "kuberay_version=9.9.9;kuberay_crd=RayCluster"
    assert env["RAY_CLUSTER_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert container["args"][0] == "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; " + str(
        env["KUBERAY_GEN_RAY_START_CMD"]
    )
    assert str(env["KUBERAY_GEN_RAY_START_CMD"]).startswith("ray start --head ")


def test_worker_pod_uses_gpu_limit_and_head_service_address() -> None:
    body = cluster()
    pod = build_worker_pod(ctx(body), body["spec"]["workerGroupSpecs"][0])
    assert pod["metadata"]["name"].startswith("demo-gpu-worker-")
    assert pod["metadata"]["labels"]["ray.io/node-type"] == "worker"
    assert pod["metadata"]["labels"]["ray.io/group"] == "gpu"
    assert pod["metadata"]["labels"]["ray.io/identifier"] == "demo-worker"
    container = pod["spec"]["containers"][0]
    flags = start_flags(container)
    assert "--head" not in container["args"][0]
    assert flags["num-cpus"] == "2"  # 1500m rounds up
    assert flags["num-gpus"] == "1"
    assert flags["memory"] == str(8 * 1024**3)
    assert flags["address"] == "demo-head-svc.team-a.svc.cluster.local:6379"
    env = env_of(container)
    assert env["FQ_RAY_IP"] == "demo-head-svc.team-a.svc.cluster.local"
    assert env["RAY_IP"] == "demo-head-svc"
    assert env["RAY_ADDRESS"] == "demo-head-svc.team-a.svc.cluster.local:6379"
    init = pod["spec"]["initContainers"][0]
    assert init["name"] == "wait-gcs-ready" and init["image"] == "rayproject/ray:2.41.0-gpu"
    # The template's own settings survive.
    assert pod["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert {"name": "shared-mem", "mountPath": "/dev/shm"} in container["volumeMounts"]


def test_explicit_ray_start_params_win() -> None:
    body = cluster()
    group = body["spec"]["workerGroupSpecs"][0]
    group["rayStartParams"] = {
        "num-cpus": "7",
        "num-gpus": "0",
        "resources": '{"custom": 3}',
        "block": "false",
    }
    container = build_worker_pod(ctx(body), group)["spec"]["containers"][0]
    flags = start_flags(container)
    assert flags["num-cpus"] == "7"
    assert flags["num-gpus"] == "0"
    assert json.loads(flags["resources"]) == {"custom": 3}
    assert "block" not in flags


def test_tpu_limits_become_custom_resources() -> None:
    derived = ray_start.derived_start_params({"limits": {"google.com/tpu": "4", "cpu": "8"}})
    assert json.loads(derived["resources"]) == {"TPU": 4.0}
    assert derived["num-cpus"] == "8"
    assert "num-gpus" not in derived


def test_requests_used_when_no_limits() -> None:
    assert ray_start.derived_start_params({"requests": {"cpu": "3", "memory": "1Gi"}}) == {
        "num-cpus": "3",
        "memory": str(1024**3),
    }


def test_user_command_with_ray_start_is_left_alone() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["command"] = [
        "ray start --head --block"
    ]
    container = build_head_pod(ctx(body))["spec"]["containers"][0]
    assert container["command"] == ["ray start --head --block"]
    assert "args" not in container


def test_user_command_runs_before_ray_start() -> None:
    # `ray start --block` never returns, so KubeRay runs the user's command first.
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["args"] = ["echo ready"]
    container = build_head_pod(ctx(body))["spec"]["containers"][0]
    assert container["args"][0].startswith("echo ready && ulimit -n ")


def test_ray_container_selected_by_env() -> None:
    body = cluster()
    spec = body["spec"]["headGroupSpec"]["template"]["spec"]
    spec["containers"].insert(0, {"name": "sidecar", "image": "busybox"})
    spec["containers"][1]["env"] = [{"name": "RAY", "value": "true"}]
    pod = build_head_pod(ctx(body))
    assert "command" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][1]["command"] == ["/bin/bash", "-c", "--"]


def test_autoscaler_sidecar_and_no_monitor() -> None:
    body = cluster(
        enableInTreeAutoscaling=True,
        autoscalerOptions={"image": "my/autoscaler:1", "resources": {"limits": {"cpu": "1"}}},
    )
    pod = build_head_pod(ctx(body))
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert names == ["ray-head", "autoscaler"]
    autoscaler = pod["spec"]["containers"][1]
    assert autoscaler["image"] == "my/autoscaler:1"
    assert autoscaler["resources"] == {"limits": {"cpu": "1"}}
    assert "kuberay-autoscaler" in autoscaler["args"][0]
    assert start_flags(pod["spec"]["containers"][0])["no-monitor"] == "true"
    assert pod["spec"]["serviceAccountName"] == "demo"


def test_custom_gcs_port_propagates_to_workers() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["rayStartParams"] = {"port": "6380"}
    worker = build_worker_pod(ctx(body), body["spec"]["workerGroupSpecs"][0])["spec"]["containers"][0]
    assert start_flags(worker)["address"].endswith(":6380")
    head = build_head_pod(ctx(body))["spec"]["containers"][0]
    assert env_of(head)["RAY_ADDRESS"] == "127.0.0.1:6380"


@pytest.mark.parametrize("name", ["a" * 80, "x.y_z"])
def test_label_values_are_valid(name: str) -> None:
    value = labels.label_value(name)
    assert len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()
