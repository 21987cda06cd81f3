"""KubeRay parity (issue 8) of what runs in a Ray pod: probes, shell, env, init container, autoscaler,
labels. Each test names the point of the issue it guards."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.operator.ray.builders import probes, rbac
from rayquota.operator.ray.builders.autoscaler_sidecar import AUTOSCALER_START_CMD
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.vocabulary import labels
from tests.unit.ray.fixtures import cluster


def ctx(body: dict[str, Any]) -> PodContext:
    return PodContext(cluster=body, operator_version="1.6.2", spec_hash="h")


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def worker(body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return build_worker_pod(ctx(body), body["spec"]["workerGroupSpecs"][0], **kwargs)


# --- 3: health probes ---------------------------------------------------------------------------


def test_head_probes_check_raylet_and_gcs_with_kuberay_timings() -> None:
    container = build_head_pod(ctx(cluster()))["spec"]["containers"][0]
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    command = readiness["exec"]["command"]
    assert command[:2] == ["bash", "-c"]
    assert "http://localhost:52365/api/local_raylet_healthz" in command[2]
    assert "http://localhost:8265/api/gcs_healthz" in command[2]
    assert liveness["exec"] == readiness["exec"]
    assert {k: readiness[k] for k in readiness if k != "exec"} == {
        "initialDelaySeconds": 10,
        "periodSeconds": 5,
        "timeoutSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 10,
    }
    assert (liveness["initialDelaySeconds"], liveness["failureThreshold"], liveness["timeoutSeconds"]) == (
        30,
        120,
        5,
    )


def test_worker_probes_check_only_the_raylet() -> None:
    container = worker(cluster())["spec"]["containers"][0]
    command = container["readinessProbe"]["exec"]["command"][2]
    assert "local_raylet_healthz" in command and "gcs_healthz" not in command
    assert container["readinessProbe"]["timeoutSeconds"] == 2


def test_probe_ports_follow_ray_start_params() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["rayStartParams"] = {
        "dashboard-port": "9000",
        "dashboard-agent-listen-port": "9001",
    }
    command = build_head_pod(ctx(body))["spec"]["containers"][0]["livenessProbe"]["exec"]["command"][2]
    assert (
        "localhost:9001/api/local_raylet_healthz" in command and "localhost:9000/api/gcs_healthz" in command
    )


def test_users_probes_are_kept() -> None:
    body = cluster()
    mine = {"tcpSocket": {"port": 6379}, "periodSeconds": 1}
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["readinessProbe"] = mine
    container = build_head_pod(ctx(body))["spec"]["containers"][0]
    assert container["readinessProbe"] == mine
    assert "exec" in container["livenessProbe"]


def test_new_ray_gets_the_single_http_health_endpoint() -> None:
    body = cluster(rayVersion="2.53.0")
    probe = build_head_pod(ctx(body))["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"] == {"path": "/api/healthz", "port": 52365} and "exec" not in probe
    assert not probes.supports_unified_health_check("2.52.1")
    assert not probes.supports_unified_health_check("nightly")


def test_rayservice_workers_also_need_the_serve_proxy() -> None:
    body = cluster()
    body["metadata"]["labels"] = {labels.ORIGINATED_FROM_CRD: "RayService"}
    container = worker(body)["spec"]["containers"][0]
    readiness = container["readinessProbe"]
    assert "localhost:8000/-/healthz" in readiness["exec"]["command"][2]
    assert readiness["failureThreshold"] == 1
    assert "-/healthz" not in container["livenessProbe"]["exec"]["command"][2]


def test_a_rayservices_pods_are_labelled_for_its_serve_service_and_fail_over_fast() -> None:
    body = cluster()
    body["metadata"]["labels"] = {labels.ORIGINATED_FROM_CRD: "RayService"}
    head, work = build_head_pod(ctx(body)), worker(body)
    # Workers serve from the start (their readiness probe gates traffic); the head once labelled.
    assert head["metadata"]["labels"]["ray.io/serve"] == "false"
    assert work["metadata"]["labels"]["ray.io/serve"] == "true"
    for pod in (head, work):
        env = env_of(pod["spec"]["containers"][0])
        assert env["RAY_timeout_ms_task_wait_for_death_info"] == "0"
        assert env["RAY_gcs_server_request_timeout_seconds"] == "5"
        assert env["RAY_SERVE_KV_TIMEOUT_S"] == "5"
    plain = cluster()
    assert "ray.io/serve" not in worker(plain)["metadata"]["labels"]
    assert "RAY_SERVE_KV_TIMEOUT_S" not in env_of(worker(plain)["spec"]["containers"][0])


# --- 6: autoscaler sidecar ----------------------------------------------------------------------


def autoscaling_cluster(**options: Any) -> dict[str, Any]:
    return cluster(enableInTreeAutoscaling=True, autoscalerOptions=options)


def test_autoscaler_shares_ray_logs_with_the_head() -> None:
    pod = build_head_pod(ctx(autoscaling_cluster()))
    head, autoscaler = pod["spec"]["containers"]
    mount = {"name": "ray-logs", "mountPath": "/tmp/ray"}
    assert mount in head["volumeMounts"] and mount in autoscaler["volumeMounts"]
    assert {"name": "ray-logs", "emptyDir": {}} in pod["spec"]["volumes"]
    assert env_of(autoscaler)["KUBERAY_GEN_AUTOSCALER_START_CMD"] == AUTOSCALER_START_CMD
    assert autoscaler["command"] == ["/bin/bash", "-c", "--"] and autoscaler["args"] == [AUTOSCALER_START_CMD]
    assert autoscaler["imagePullPolicy"] == "IfNotPresent"


def test_autoscaler_command_and_args_can_be_replaced() -> None:
    body = autoscaling_cluster(
        command=["/bin/sh", "-c"], args=["ulimit -n 4096; $KUBERAY_GEN_AUTOSCALER_START_CMD"]
    )
    autoscaler = build_head_pod(ctx(body))["spec"]["containers"][1]
    assert autoscaler["command"] == ["/bin/sh", "-c"]
    assert autoscaler["args"] == ["ulimit -n 4096; $KUBERAY_GEN_AUTOSCALER_START_CMD"]


def test_autoscaler_role_can_resize_pods_and_rbac_is_labelled_like_kuberay() -> None:
    objects = dict(rbac.build_autoscaler_rbac(autoscaling_cluster()))
    assert {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]} in objects["roles"]["rules"]
    for manifest in objects.values():
        assert manifest["metadata"]["labels"][labels.APP_NAME] == "kuberay"
        assert manifest["metadata"]["labels"][labels.CREATED_BY] == "kuberay-operator"


# --- 7, 8: env and shell ------------------------------------------------------------------------


@pytest.mark.parametrize("node", ["head", "worker"])
def test_every_ray_container_knows_its_namespace_and_runs_a_plain_shell(node: str) -> None:
    body = cluster()
    pod = build_head_pod(ctx(body)) if node == "head" else worker(body)
    container = pod["spec"]["containers"][0]
    assert env_of(container)["RAY_CLUSTER_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert container["command"] == ["/bin/bash", "-c", "--"]  # not a login shell
    assert container["args"][0].startswith("ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start")


def test_overwrite_container_cmd_annotation_keeps_the_users_command() -> None:
    body = cluster()
    body["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["command"] = ["my-entry"]
    container = build_head_pod(ctx(body))["spec"]["containers"][0]
    assert container["command"] == ["my-entry"] and "args" not in container
    assert env_of(container)["KUBERAY_GEN_RAY_START_CMD"].startswith("ray start --head")


# --- 9: the wait-gcs-ready init container --------------------------------------------------------


def test_wait_gcs_init_container_copies_the_ray_containers_env_and_mounts() -> None:
    body = cluster()
    ray = body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    ray["env"] = [{"name": "RAY_USE_TLS", "value": "1"}]
    ray["volumeMounts"] = [{"name": "certs", "mountPath": "/etc/ray/tls"}]
    ray["securityContext"] = {"runAsUser": 1000}
    pod = worker(body)
    [init] = pod["spec"]["initContainers"]
    assert init["name"] == "wait-gcs-ready"
    assert init["volumeMounts"] == [{"name": "certs", "mountPath": "/etc/ray/tls"}]
    assert init["securityContext"] == {"runAsUser": 1000}
    env = env_of(init)
    assert env["RAY_USE_TLS"] == "1"
    assert env["FQ_RAY_IP"] == "demo-head-svc.team-a.svc.cluster.local"
    assert env["RAY_IP"] == "demo-head-svc"
    # The operator's own env is not copied into the init container.
    assert "KUBERAY_GEN_RAY_START_CMD" not in env
    assert init["command"] == ["/bin/bash", "-c", "--"]
    assert "ray health-check --address demo-head-svc.team-a.svc.cluster.local:6379" in init["args"][0]


def test_users_init_containers_learn_the_head_address() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["initContainers"] = [{"name": "tls", "image": "x"}]
    [init] = build_head_pod(ctx(body))["spec"]["initContainers"]
    assert env_of(init)["FQ_RAY_IP"] == "demo-head-svc.team-a.svc.cluster.local"


# --- 12: group labels and resources reach `ray start` ----------------------------------------------


def test_group_labels_and_resources_reach_ray_start_and_the_pod() -> None:
    body = cluster()
    group = body["spec"]["workerGroupSpecs"][0]
    group["labels"] = {"zone": "b", "accel": "a100"}
    group["resources"] = {"CPU": "3", "memory": "1Gi", "nvidia.com/gpu": "2", "TPU": "4"}
    group["rayStartParams"] = {"num-cpus": "9"}
    pod = worker(body)
    args = pod["spec"]["containers"][0]["args"][0]
    assert "--labels=accel=a100,zone=b" in args
    assert "--num-cpus=3" in args and "--memory=1073741824" in args and "--num-gpus=2" in args
    assert "--resources='{\"TPU\":4.0}'" in args
    assert pod["metadata"]["labels"]["zone"] == "b"


def test_shm_is_skipped_when_the_object_store_lives_elsewhere() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["rayStartParams"] = {"plasma-directory": "/data"}
    pod = build_head_pod(ctx(body))
    assert not any(v["name"] == "shared-mem" for v in pod["spec"].get("volumes") or [])


# --- 13: labels tools select on --------------------------------------------------------------------


def test_created_by_defaults_to_kuberays_value() -> None:
    assert labels.CREATED_BY_VALUE == "kuberay-operator"
    assert (
        labels.cluster_selector("demo") == "ray.io/cluster=demo,app.kubernetes.io/created-by=kuberay-operator"
    )


def test_template_labels_override_defaults_except_identity() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["metadata"]["labels"] = {
        "ray.io/cluster": "other",
        "app.kubernetes.io/created-by": "someone",
        "ray.io/is-ray-node": "custom",
    }
    pod_labels = build_head_pod(ctx(body))["metadata"]["labels"]
    assert pod_labels["ray.io/cluster"] == "demo"
    assert pod_labels["app.kubernetes.io/created-by"] == "kuberay-operator"
    assert pod_labels["ray.io/is-ray-node"] == "custom"


def test_replica_index_label_uses_the_lowest_free_index() -> None:
    assert labels.free_replica_indices({0, 2}, 3) == [1, 3, 4]
    body = cluster()
    pods = [worker(body, replica_index=i) for i in labels.free_replica_indices([], 2)]
    assert [p["metadata"]["labels"][labels.RAY_WORKER_REPLICA_INDEX] for p in pods] == ["0", "1"]
    assert labels.replica_indices_in_use(pods) == {0, 1}
    multi = worker(body, replica=("gpu-abcde", 1), replica_index=0)["metadata"]["labels"]
    assert (multi[labels.RAY_WORKER_REPLICA_NAME], multi[labels.RAY_REPLICA_HOST_INDEX]) == ("gpu-abcde", "1")


def test_rayjob_cluster_carries_the_submission_mode() -> None:
    rayjob = {"metadata": {"name": "job", "labels": {"team": "a"}}, "spec": {"submissionMode": "HTTPMode"}}
    assert labels.rayjob_cluster_labels(rayjob) == {
        "team": "a",
        "ray.io/originated-from-cr-name": "job",
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/job-submission-mode": "HTTPMode",
    }
    rayjob["spec"] = {}
    assert labels.rayjob_cluster_labels(rayjob)["ray.io/job-submission-mode"] == "K8sJobMode"


def test_building_a_pod_never_changes_the_cluster() -> None:
    body = autoscaling_cluster()
    before = copy.deepcopy(body)
    build_head_pod(ctx(body))
    worker(body)
    assert body == before


def test_head_metadata_and_shm_size_as_kuberay_writes_them() -> None:
    body = cluster()
    pod = build_head_pod(ctx(body))
    assert pod["metadata"]["generateName"] == "demo-head-"
    assert pod["metadata"]["name"].startswith(pod["metadata"]["generateName"])
    assert pod["metadata"]["annotations"]["ray.io/ft-enabled"] == "false"
    shm = next(v for v in pod["spec"]["volumes"] if v["name"] == "shared-mem")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}  # the limit, as written
    body["spec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    assert build_head_pod(ctx(body))["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"


def test_autoscaler_security_context_even_empty_replaces_the_default() -> None:
    autoscaler = build_head_pod(ctx(autoscaling_cluster(securityContext={})))["spec"]["containers"][1]
    assert autoscaler["securityContext"] == {}
