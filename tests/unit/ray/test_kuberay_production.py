"""KubeRay in production (issue 34): the cluster's own names, KubeRay's operator settings and
annotations, and KubeRay v1.7.0's validation rules where rayquota differed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.operator.kuberay_env import KUBERAY_ENV, refusals
from rayquota.operator.ray.builders import ingress
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.dashboard_api.resolver import ServiceDNSResolver, resolver_from_settings
from rayquota.operator.ray.raycluster.plan import plan_cluster
from rayquota.operator.ray.raycluster.status import cluster_status
from rayquota.operator.ray.rayjob.validation import validate_rayjob
from rayquota.operator.ray.rayservice.validation import validate_rayservice
from rayquota.operator.ray.vocabulary import labels
from tests.config_env import operator_config_from_env
from tests.unit.ray.fixtures import BASE_CLUSTER, cluster
from tests.unit.ray.rayservice_fixtures import service

DOMAIN = "example.internal"


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def named_head_service(name: str = "my-head") -> dict[str, Any]:
    body = cluster()
    body["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": name}}
    return body


# --- the cluster's own names -------------------------------------------------------------------


def test_the_head_address_uses_the_cluster_domain_and_the_head_services_own_name() -> None:
    body = named_head_service()
    ctx = PodContext(body, "v1", "hash", DOMAIN)
    worker = build_worker_pod(ctx, body["spec"]["workerGroupSpecs"][0])
    ray = worker["spec"]["containers"][0]
    env = env_of(ray)
    assert env["FQ_RAY_IP"] == f"my-head.team-a.svc.{DOMAIN}"
    assert env["RAY_IP"] == "my-head"
    assert env["RAY_ADDRESS"] == f"my-head.team-a.svc.{DOMAIN}:6379"
    [wait_gcs] = [c for c in worker["spec"]["initContainers"] if c["name"] == labels.WAIT_GCS_INIT_CONTAINER]
    assert f"--address my-head.team-a.svc.{DOMAIN}:6379" in " ".join(
        wait_gcs.get("args") or wait_gcs["command"]
    )
    assert "cluster.local" not in str(worker)
    assert "demo-head-svc" not in str(worker)


def test_the_default_names_are_kuberays() -> None:
    body = cluster()
    worker = build_worker_pod(PodContext(body, "v1", "hash"), body["spec"]["workerGroupSpecs"][0])
    env = env_of(worker["spec"]["containers"][0])
    assert env["FQ_RAY_IP"] == "demo-head-svc.team-a.svc.cluster.local"
    assert env["RAY_IP"] == "demo-head-svc"


def test_the_planner_builds_pods_in_the_cluster_domain() -> None:
    plan = plan_cluster(named_head_service(), [], "v1", cluster_domain=DOMAIN)
    assert plan.create and all(f"my-head.team-a.svc.{DOMAIN}" in str(pod) for pod in plan.create[1:])
    head = build_head_pod(PodContext(named_head_service(), "v1", "hash", DOMAIN))
    assert "cluster.local" not in str(head)


def test_the_dashboard_url_follows_the_domain_and_the_head_service_name() -> None:
    assert ServiceDNSResolver(DOMAIN).dashboard_url(named_head_service()) == (
        f"http://my-head.team-a.svc.{DOMAIN}:8265"
    )
    resolver = resolver_from_settings("service", None, None, DOMAIN)
    assert resolver.dashboard_url(cluster()) == f"http://demo-head-svc.team-a.svc.{DOMAIN}:8265"


def test_the_ingress_backend_and_the_status_name_the_head_services_own_name() -> None:
    body = named_head_service()
    body["spec"]["headGroupSpec"]["enableIngress"] = True
    rule = ingress.build_ingress(body)["spec"]["rules"][0]
    assert rule["http"]["paths"][0]["backend"]["service"]["name"] == "my-head"
    status = cluster_status(body, [], None, plan_cluster(body, [], "v1"), [], "2026-01-01T00:00:00Z")
    assert status["head"]["serviceName"] == "my-head"


def test_the_operator_reads_kuberays_cluster_domain_setting() -> None:
    assert operator_config_from_env({}).cluster_domain == "cluster.local"
    assert operator_config_from_env({"CLUSTER_DOMAIN": DOMAIN}).cluster_domain == DOMAIN
    assert operator_config_from_env({"CLUSTER_DOMAIN": ""}).cluster_domain == "cluster.local"
    with pytest.raises(ValueError, match="RAYQUOTA_CLUSTER_DOMAIN is now KubeRay's CLUSTER_DOMAIN"):
        operator_config_from_env({"RAYQUOTA_CLUSTER_DOMAIN": DOMAIN})


def test_a_rayservice_may_not_name_its_head_service() -> None:
    def name_it(config: dict[str, Any]) -> None:
        config["headGroupSpec"]["headService"] = {"metadata": {"name": "fixed"}}

    assert "spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set" in (
        validate_rayservice(service(name_it))
    )
    assert validate_rayservice(service()) == []


# --- KubeRay's operator settings ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ENABLE_INIT_CONTAINER_INJECTION", "false"),
        ("ENABLE_PROBES_INJECTION", "False"),
        ("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "true"),
        ("RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "60"),
        ("ENABLE_RANDOM_POD_DELETE", "true"),
        ("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS", "60"),
        ("RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS", "10"),
        ("DELETE_RAYJOB_CR_AFTER_JOB_FINISHES", "true"),
        ("ENABLE_ZERO_DOWNTIME", "false"),
        ("ENABLE_LOGIN_SHELL", "true"),
        ("ENABLE_DETERMINISTIC_HEAD_POD_NAME", "true"),
        ("ENABLE_WEBHOOKS", "true"),
    ],
)
def test_a_kuberay_setting_rayquota_cannot_honour_is_refused_at_start_up_by_name(
    name: str, value: str
) -> None:
    with pytest.raises(ValueError) as refused:
        operator_config_from_env({name: value})
    assert f"{name}={value!r}" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ENABLE_INIT_CONTAINER_INJECTION", "true"),
        ("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "false"),
        ("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS", "300"),
        ("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS", "not-a-number"),  # KubeRay uses its default
        ("DELETE_RAYJOB_CR_AFTER_JOB_FINISHES", "false"),
        ("ENABLE_ZERO_DOWNTIME", "true"),
        ("USE_INGRESS_ON_OPENSHIFT", "true"),
        ("ENABLE_GCS_FT_REDIS_CLEANUP", "false"),  # honoured by the Redis cleanup
    ],
)
def test_a_kuberay_setting_asking_for_what_rayquota_does_is_accepted(name: str, value: str) -> None:
    assert refusals({name: value}) == []
    operator_config_from_env({name: value})


def test_every_kuberay_operator_setting_is_listed() -> None:
    # KubeRay v1.7.0's os.Getenv calls in ray-operator (controllers and main.go).
    kuberay = {
        "CLUSTER_DOMAIN", "ENABLE_INIT_CONTAINER_INJECTION", "ENABLE_PROBES_INJECTION",
        "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "ENABLE_GCS_FT_REDIS_CLEANUP",
        "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "ENABLE_RANDOM_POD_DELETE",
        "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS", "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS",
        "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES", "ENABLE_ZERO_DOWNTIME", "USE_INGRESS_ON_OPENSHIFT",
        "ENABLE_LOGIN_SHELL", "ENABLE_DETERMINISTIC_HEAD_POD_NAME", "ENABLE_WEBHOOKS",
    }  # fmt: skip
    from rayquota.operator.kuberay_env import HONOURED

    assert set(KUBERAY_ENV) | set(HONOURED) == kuberay


# --- annotations -------------------------------------------------------------------------------


def provisioned(body: dict[str, Any], annotation: str | None) -> dict[str, Any]:
    body = copy.deepcopy(body)
    if annotation is not None:
        body["metadata"]["annotations"] = {labels.DISABLE_PROVISIONED_HEAD_RESTART: annotation}
    body["status"] = {"conditions": [{"type": "RayClusterProvisioned", "status": "True"}]}
    return body


def test_a_provisioned_head_is_not_replaced_when_kuberays_annotation_says_so() -> None:
    plan = plan_cluster(provisioned(cluster(), "true"), [], "v1")
    assert [p for p in plan.create if p["metadata"]["labels"][labels.RAY_NODE_TYPE] == "head"] == []
    assert any(labels.DISABLE_PROVISIONED_HEAD_RESTART in w for w in plan.waiting)
    for annotation in (None, "false"):
        plan = plan_cluster(provisioned(cluster(), annotation), [], "v1")
        assert [p for p in plan.create if p["metadata"]["labels"][labels.RAY_NODE_TYPE] == "head"] != []
    # Before it was ever provisioned, the head is created whatever the annotation says.
    first = copy.deepcopy(cluster())
    first["metadata"]["annotations"] = {labels.DISABLE_PROVISIONED_HEAD_RESTART: "true"}
    assert any(
        p["metadata"]["labels"][labels.RAY_NODE_TYPE] == "head" for p in plan_cluster(first, [], "v1").create
    )


# --- KubeRay v1.7.0's RayJob and RayService rules ----------------------------------------------


def rayjob(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "job"},
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": copy.deepcopy(BASE_CLUSTER["spec"]), **spec},
    }


LEGACY = {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteCluster"}}


def test_legacy_deletion_policies_go_with_shutdown_after_job_finishes_as_in_kuberay() -> None:
    assert validate_rayjob(rayjob(shutdownAfterJobFinishes=True, deletionStrategy=LEGACY)) == []
    none = {**LEGACY, "onFailure": {"policy": "DeleteNone"}}
    assert validate_rayjob(rayjob(shutdownAfterJobFinishes=True, deletionStrategy=none)) == [
        "spec.deletionStrategy.onFailure.policy is DeleteNone but spec.shutdownAfterJobFinishes is true"
    ]
    rules = {"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]}
    assert validate_rayjob(rayjob(shutdownAfterJobFinishes=True, deletionStrategy=rules)) == [
        "spec.deletionStrategy.deletionRules and spec.shutdownAfterJobFinishes cannot both be set"
    ]
    assert validate_rayjob(rayjob(deletionStrategy=rules)) == []


def test_ttl_after_finished_needs_shutdown_after_job_finishes_as_in_kuberay() -> None:
    [error] = validate_rayjob(rayjob(ttlSecondsAfterFinished=60))
    assert error.startswith("spec.ttlSecondsAfterFinished needs spec.shutdownAfterJobFinishes: true")
    assert validate_rayjob(rayjob(ttlSecondsAfterFinished=60, shutdownAfterJobFinishes=True)) == []
    assert validate_rayjob(rayjob(ttlSecondsAfterFinished=0)) == []


def test_an_incremental_upgrade_needs_the_ray_autoscaler_as_in_kuberay() -> None:
    problems = validate_rayservice(service(upgrade="NewClusterWithIncrementalUpgrade"))
    assert any(
        p.startswith("Ray Autoscaler is required for NewClusterWithIncrementalUpgrade") for p in problems
    )

    def autoscale(config: dict[str, Any]) -> None:
        config["enableInTreeAutoscaling"] = True

    assert validate_rayservice(service(autoscale, upgrade="NewClusterWithIncrementalUpgrade")) == []
    assert validate_rayservice(service(upgrade="NewCluster")) == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("5m", "is not implemented by rayquota"),
        ("300", "is not implemented by rayquota"),
        ("1h30m", "is not implemented by rayquota"),
        ("0", "must be positive"),
        ("-5m", "must be positive"),
        ("soon", "neither a Go duration"),
    ],
)
def test_kuberays_initializing_timeout_annotation_is_refused_not_ignored(value: str, fragment: str) -> None:
    body = service()
    body["metadata"]["annotations"] = {"ray.io/initializing-timeout": value}
    [problem] = validate_rayservice(body)
    assert problem.startswith("metadata.annotations[ray.io/initializing-timeout]") and fragment in problem
    body["metadata"]["annotations"] = {"ray.io/initializing-timeout": ""}
    assert validate_rayservice(body) == []
