"""GCS fault tolerance and token auth on the pods, as KubeRay v1.7.0 sets them up
(controllers/ray/common/pod.go, read for the env names, defaults and rules)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rayquota.api.ray_unimplemented import unimplemented_fields
from rayquota.operator.ray.builders import auth_token
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.raycluster import redis_cleanup
from rayquota.operator.ray.raycluster.plan import validate_cluster
from rayquota.operator.ray.rayjob import submitter
from tests.config_env import operator_config_from_env
from tests.unit.ray.fixtures import cluster

REDIS_PASSWORD_REF = {"secretKeyRef": {"name": "redis-password", "key": "password"}}


def ft_cluster(**options: Any) -> dict[str, Any]:
    return cluster(gcsFaultToleranceOptions={"redisAddress": "redis:6379", **options})


def pods(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = PodContext(body, "v-test", "hash")
    return build_head_pod(ctx), build_worker_pod(ctx, body["spec"]["workerGroupSpecs"][0])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


# --- GCS fault tolerance ------------------------------------------------------------------------


def test_options_give_the_head_redis_and_the_workers_a_long_reconnect() -> None:
    head, worker = pods(ft_cluster(redisPassword={"valueFrom": REDIS_PASSWORD_REF}))
    head_env = env_of(head["spec"]["containers"][0])
    assert head_env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert head_env["REDIS_PASSWORD"] == REDIS_PASSWORD_REF
    # No namespace given: the RayCluster's uid, so two clusters never share tables.
    assert head_env["RAY_external_storage_namespace"] == "uid-1"
    assert head["metadata"]["annotations"]["ray.io/external-storage-namespace"] == "uid-1"
    assert head["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    # The password reaches `ray start` through the env, never through the spec.
    assert "--redis-password=$REDIS_PASSWORD " in head["spec"]["containers"][0]["args"][0] + " "
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in head_env
    worker_env = env_of(worker["spec"]["containers"][0])
    assert worker_env["RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"
    assert "RAY_REDIS_ADDRESS" not in worker_env


def test_a_worker_keeps_its_own_reconnect_timeout_and_the_namespace_option_wins() -> None:
    body = ft_cluster(externalStorageNamespace="shared-ns", redisUsername={"value": "ray"})
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAY_gcs_rpc_server_reconnect_timeout_s", "value": "120"}
    ]
    head, worker = pods(body)
    head_env = env_of(head["spec"]["containers"][0])
    assert head_env["RAY_external_storage_namespace"] == "shared-ns"
    assert head_env["REDIS_USERNAME"] == "ray"
    assert "--redis-username=$REDIS_USERNAME" in head["spec"]["containers"][0]["args"][0]
    assert env_of(worker["spec"]["containers"][0])["RAY_gcs_rpc_server_reconnect_timeout_s"] == "120"


def test_the_older_annotation_form_passes_the_password_on_for_the_cleanup() -> None:
    body = cluster()
    body["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    head_spec = body["spec"]["headGroupSpec"]
    head_spec["rayStartParams"] = {"redis-password": "s3cret"}
    head_spec["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}
    ]
    assert validate_cluster(body) == []
    head, worker = pods(body)
    head_env = env_of(head["spec"]["containers"][0])
    assert head_env["REDIS_PASSWORD"] == "s3cret"
    assert head_env["RAY_external_storage_namespace"] == "uid-1"
    assert env_of(worker["spec"]["containers"][0])["RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"


def test_without_fault_tolerance_nothing_is_added() -> None:
    head, worker = pods(cluster())
    assert head["metadata"]["annotations"]["ray.io/ft-enabled"] == "false"
    assert "RAY_external_storage_namespace" not in env_of(head["spec"]["containers"][0])
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in env_of(worker["spec"]["containers"][0])


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda b: b["metadata"].update(annotations={"ray.io/ft-enabled": "true"}), "are both set"),
        (
            lambda b: b["spec"]["headGroupSpec"].update(rayStartParams={"redis-password": "x"}),
            "redisPassword",
        ),
        (
            lambda b: b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(
                env=[{"name": "RAY_REDIS_ADDRESS", "value": "r:1"}]
            ),
            "RAY_REDIS_ADDRESS cannot be set",
        ),
        (lambda b: b["spec"]["gcsFaultToleranceOptions"].pop("redisAddress"), "redisAddress must be set"),
        (lambda b: b["spec"]["gcsFaultToleranceOptions"].update(backend="rocksdb"), "backend 'rocksdb'"),
        (lambda b: b["spec"]["gcsFaultToleranceOptions"].update(storage={"size": "1Gi"}), "storage applies"),
        (
            lambda b: b["metadata"].update(annotations={"ray.io/external-storage-namespace": "n"}),
            "externalStorageNamespace",
        ),
    ],
)
def test_kuberay_refuses_these_fault_tolerance_specs(edit: Any, fragment: str) -> None:
    body = ft_cluster()
    assert validate_cluster(body) == []
    edit(body)
    errors = validate_cluster(body)
    assert any(fragment in e for e in errors), errors


def test_redis_address_in_the_env_without_fault_tolerance_is_refused() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}
    ]
    assert any("implicitly enables GCS fault tolerance" in e for e in validate_cluster(body))


def test_the_cleanup_job_is_the_head_with_only_the_ray_container_running_the_script() -> None:
    body = ft_cluster(redisPassword={"valueFrom": REDIS_PASSWORD_REF})
    head, _ = pods(body)
    head["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    job = redis_cleanup.build_job(body, head)
    assert job["metadata"]["name"] == "demo-redis-cleanup"
    assert job["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    assert job["metadata"]["labels"]["ray.io/cluster"] == "demo"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 300
    pod = job["spec"]["template"]
    assert "name" not in pod["metadata"] and "ownerReferences" not in pod["metadata"]
    assert pod["spec"]["restartPolicy"] == "Never"
    [container] = pod["spec"]["containers"]
    assert container["name"] == "ray-head"
    assert "cleanup_redis_storage" in container["args"][0] and "username=" not in container["args"][0]
    assert "readinessProbe" not in container and "livenessProbe" not in container
    assert container["resources"]["requests"] == {"cpu": "200m", "memory": "256Mi"}
    env = env_of(container)
    assert env["RAY_redis_db_connect_retries"] == "120"
    assert env["REDIS_PASSWORD"] == REDIS_PASSWORD_REF and env["RAY_external_storage_namespace"] == "uid-1"
    with_user = ft_cluster(redisUsername={"value": "ray"})
    head, _ = pods(with_user)
    script = redis_cleanup.build_job(with_user, head)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "username=os.getenv('REDIS_USERNAME'" in script


def test_long_cluster_names_are_cut_as_kuberay_cuts_them() -> None:
    name = "a" * 60
    assert redis_cleanup.job_name(name) == ("a" * 60 + "-redis-cleanup")[-63:]
    assert auth_token.secret_name("1" + "b" * 10, {}) == "r" + "b" * 10
    assert auth_token.secret_name("c" * 60, {}) == "c" * 50


def test_cleanup_is_wanted_for_redis_only_and_can_be_switched_off() -> None:
    assert redis_cleanup.wanted(ft_cluster())
    assert not redis_cleanup.wanted(cluster())
    # KubeRay's variable is the override of kuberay.gcsFtRedisCleanup; the app sets it at start.
    config = operator_config_from_env({"ENABLE_GCS_FT_REDIS_CLEANUP": "false"})
    assert config.gcs_ft_redis_cleanup is False
    redis_cleanup.set_cleanup_enabled(config.gcs_ft_redis_cleanup)
    try:
        assert not redis_cleanup.wanted(ft_cluster())
    finally:
        redis_cleanup.set_cleanup_enabled(True)


def test_job_outcome_reads_the_job_conditions() -> None:
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    target = {"status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}
    running = {"status": {"active": 1}}
    assert redis_cleanup.job_outcome(done) == "Complete"
    assert redis_cleanup.job_outcome(target) == "Failed"
    assert redis_cleanup.job_outcome(running) is None


# --- token auth -----------------------------------------------------------------------------------

TOKEN_REF = {"secretKeyRef": {"name": "demo", "key": "auth_token"}}


def auth_cluster(**options: Any) -> dict[str, Any]:
    return cluster(rayVersion="2.60.0", authOptions={"mode": "token", **options})


def test_every_ray_container_gets_the_token_from_the_secret() -> None:
    body = auth_cluster()
    body["spec"]["enableInTreeAutoscaling"] = True
    head, worker = pods(body)
    for container in [*head["spec"]["containers"], worker["spec"]["containers"][0]]:
        env = env_of(container)
        assert env["RAY_AUTH_MODE"] == "token", container["name"]
        assert env["RAY_AUTH_TOKEN"] == TOKEN_REF, container["name"]
    [wait_gcs] = [c for c in worker["spec"]["initContainers"] if c["name"] == "wait-gcs-ready"]
    assert env_of(wait_gcs)["RAY_AUTH_TOKEN"] == TOKEN_REF


def test_a_named_secret_is_used_and_none_is_made() -> None:
    body = auth_cluster(secretName="my-token")
    head, _ = pods(body)
    assert env_of(head["spec"]["containers"][0])["RAY_AUTH_TOKEN"]["secretKeyRef"]["name"] == "my-token"
    assert not auth_token.wants_secret(body)
    assert auth_token.wants_secret(auth_cluster())


def test_mode_left_out_or_disabled_is_no_auth_as_in_kuberay() -> None:
    for options in ({}, {"mode": "disabled"}):
        head, _ = pods(cluster(authOptions=options))
        assert "RAY_AUTH_MODE" not in env_of(head["spec"]["containers"][0])


def test_the_secret_holds_32_random_bytes_and_belongs_to_the_cluster() -> None:
    first, second = auth_token.build_secret(auth_cluster()), auth_token.build_secret(auth_cluster())
    token = first["stringData"]["auth_token"]
    assert len(base64.b64decode(token)) == 32 and token != second["stringData"]["auth_token"]
    assert first["metadata"]["name"] == "demo" and first["metadata"]["labels"] == {"ray.io/cluster": "demo"}
    assert first["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


def test_the_submitters_send_the_token() -> None:
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "team-a", "uid": "j1"},
        "spec": {"entrypoint": "python x.py"},
    }
    body = auth_cluster()
    job = submitter.submitter_job(rayjob, "id", "demo-head-svc:8265", "img", cluster=body)
    assert env_of(job["spec"]["template"]["spec"]["containers"][0])["RAY_AUTH_TOKEN"] == TOKEN_REF
    sidecar = submitter.sidecar_container(rayjob, "id", "img", 8265, body)
    assert env_of(sidecar)["RAY_AUTH_MODE"] == "token"
    assert "RAY_AUTH_MODE" not in env_of(submitter.sidecar_container(rayjob, "id", "img", 8265, cluster()))


@pytest.mark.parametrize(
    ("version", "ok"), [("2.60.0", True), ("2.52.0", True), ("2.51.1", False), ("", False), ("latest", False)]
)
def test_token_auth_needs_ray_2_52(version: str, ok: bool) -> None:
    body = auth_cluster()
    body["spec"]["rayVersion"] = version
    errors = validate_cluster(body)
    assert (errors == []) is ok, errors
    if not ok:
        assert "spec.authOptions.mode is 'token'" in errors[0]


def test_kubernetes_delegated_auth_is_built_as_kuberay_builds_it() -> None:
    """KubeRay v1.6.2's common/pod.go: RAY_AUTH_MODE, RAY_ENABLE_K8S_TOKEN_AUTH and the projected
    ServiceAccount token on every Ray container; no Secret, no RAY_AUTH_TOKEN."""
    body = auth_cluster(enableK8sTokenAuth=True)
    body["spec"]["enableInTreeAutoscaling"] = True
    assert unimplemented_fields(body) == []
    assert validate_cluster(body) == []
    assert not auth_token.wants_secret(body)
    mount = {"name": "ray-token", "mountPath": "/var/run/secrets/ray.io/serviceaccount", "readOnly": True}
    volume = {"name": "ray-token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    head, worker = pods(body)
    assert len(head["spec"]["containers"]) == 2  # Ray and the autoscaler
    for pod in (head, worker):
        assert pod["spec"]["volumes"].count(volume) == 1
        waits = [c for c in pod["spec"].get("initContainers") or [] if c["name"] == "wait-gcs-ready"]
        for container in [*pod["spec"]["containers"], *waits]:
            env = env_of(container)
            assert env["RAY_AUTH_MODE"] == "token", container["name"]
            assert env["RAY_ENABLE_K8S_TOKEN_AUTH"] == "true", container["name"]
            assert "RAY_AUTH_TOKEN" not in env, container["name"]
            assert mount in container["volumeMounts"], container["name"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"rayVersion": "2.54.0"}, "enableK8sTokenAuth is true but spec.rayVersion is 2.54.0: 2.55.0"),
        ({"secretName": "mine"}, "enableK8sTokenAuth is true and spec.authOptions.secretName is set"),
        ({"mode": "disabled"}, "enableK8sTokenAuth is true but spec.authOptions.mode is not 'token'"),
    ],
)
def test_kubernetes_delegated_auth_follows_kuberays_rules(options: dict[str, Any], error: str) -> None:
    body = auth_cluster(enableK8sTokenAuth=True)
    body["spec"]["rayVersion"] = options.pop("rayVersion", "2.60.0")
    body["spec"]["authOptions"].update(options)
    errors = validate_cluster(body)
    assert any(error in e for e in errors), errors


def test_no_field_of_token_auth_is_warned() -> None:
    assert unimplemented_fields(auth_cluster(enableK8sTokenAuth=True)) == []
    assert unimplemented_fields(auth_cluster()) == []
    assert unimplemented_fields(ft_cluster()) == []
