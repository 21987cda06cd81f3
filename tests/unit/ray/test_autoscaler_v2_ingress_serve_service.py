"""Autoscaler v2, the head Ingress, a RayService's serveService and DeleteWorkers with autoscaling,
as KubeRay v1.7.0 does them (controllers/ray/common/{pod,ingress,service}.go and
utils/validation.go, read for the rules and messages)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.api.ray_unimplemented import unimplemented_fields
from rayquota.api.ray_v1 import DELETE_WORKERS_WITH_AUTOSCALING
from rayquota.operator.ray.builders import ingress
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.raycluster.plan import validate_cluster
from rayquota.operator.ray.rayjob.validation import validate_rayjob
from rayquota.operator.ray.rayservice.serve_service import serve_service_name
from rayquota.operator.ray.rayservice.writes import build_service_services
from tests.unit.ray.fixtures import cluster


def pods(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = PodContext(body, "v-test", "hash")
    return build_head_pod(ctx), build_worker_pod(ctx, body["spec"]["workerGroupSpecs"][0])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def autoscaling(version: str | None = None, **group: Any) -> dict[str, Any]:
    options = {"version": version} if version else {}
    body = cluster(enableInTreeAutoscaling=True, autoscalerOptions=options)
    body["spec"]["workerGroupSpecs"][0].update(group)
    return body


# --- autoscaler v2 --------------------------------------------------------------------------------


def test_v2_sets_the_env_on_the_head_and_never_restarts_ray_pods() -> None:
    head, worker = pods(autoscaling("v2", idleTimeoutSeconds=30))
    assert env_of(head["spec"]["containers"][0])["RAY_enable_autoscaler_v2"] == "true"
    assert head["spec"]["restartPolicy"] == "Never" and worker["spec"]["restartPolicy"] == "Never"
    assert "RAY_enable_autoscaler_v2" not in env_of(worker["spec"]["containers"][0])


def test_an_explicit_v1_writes_false_and_no_version_writes_nothing() -> None:
    head, worker = pods(autoscaling("v1"))
    assert env_of(head["spec"]["containers"][0])["RAY_enable_autoscaler_v2"] == "false"
    assert "restartPolicy" not in worker["spec"]
    head, _ = pods(autoscaling())
    assert "RAY_enable_autoscaler_v2" not in env_of(head["spec"]["containers"][0])
    head, _ = pods(cluster(autoscalerOptions={"version": "v2"}))  # no autoscaling: no autoscaler
    assert "RAY_enable_autoscaler_v2" not in env_of(head["spec"]["containers"][0])


def test_a_group_idle_timeout_needs_v2_and_the_error_names_the_field() -> None:
    errors = validate_cluster(autoscaling("v1", idleTimeoutSeconds=30))
    assert errors == [
        "spec.workerGroupSpecs[0].idleTimeoutSeconds is set (group 'gpu') but autoscaler v2 is not "
        "enabled: set spec.autoscalerOptions.version to 'v2'"
    ]
    assert validate_cluster(autoscaling("v2", idleTimeoutSeconds=30)) == []
    # KubeRay before 1.4 turned v2 on with the head's env; that still counts.
    old_style = autoscaling(None, idleTimeoutSeconds=30)
    old_style["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAY_enable_autoscaler_v2", "value": "true"}
    ]
    assert validate_cluster(old_style) == []


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            lambda: _with_head_env(cluster(), "RAY_enable_autoscaler_v2", "1"),
            "needs spec.enableInTreeAutoscaling: true",
        ),
        (lambda: _with_head_env(autoscaling("v2"), "RAY_enable_autoscaler_v2", "true"), "are both set"),
        (lambda: _with_restart(autoscaling("v2"), "Always"), "restartPolicy is 'Always'"),
        (
            lambda: cluster(
                enableInTreeAutoscaling=True,
                autoscalerOptions={"env": [{"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "x"}]},
            ),
            "must not set KUBERAY_GEN_AUTOSCALER_START_CMD",
        ),
    ],
)
def test_kuberay_refuses_these_autoscaler_specs(body: Any, fragment: str) -> None:
    errors = validate_cluster(body())
    assert any(fragment in e for e in errors), errors


def _with_head_env(body: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": name, "value": value}
    ]
    return body


def _with_restart(body: dict[str, Any], policy: str) -> dict[str, Any]:
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["restartPolicy"] = policy
    return body


# --- DeleteWorkers with autoscaling -------------------------------------------------------------


def rayjob(deletion: dict[str, Any], autoscale: bool) -> dict[str, Any]:
    spec = copy.deepcopy(cluster()["spec"])
    spec["enableInTreeAutoscaling"] = autoscale
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "team-a"},
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": spec, "deletionStrategy": deletion},
    }


RULES = {"deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED"}}]}
LEGACY = {"onSuccess": {"policy": "DeleteWorkers"}, "onFailure": {"policy": "DeleteCluster"}}


def test_delete_workers_with_autoscaling_is_refused_with_kuberays_reason() -> None:
    assert validate_rayjob(rayjob(RULES, True)) == [
        "spec.deletionStrategy.deletionRules[0]: DeletionPolicyType 'DeleteWorkers' not supported "
        "with autoscaling enabled"
    ]
    assert validate_rayjob(rayjob(LEGACY, True)) == [
        f"spec.deletionStrategy.onSuccess.policy: {DELETE_WORKERS_WITH_AUTOSCALING}"
    ]
    assert validate_rayjob(rayjob(RULES, False)) == []
    assert validate_rayjob(rayjob(LEGACY, False)) == []


def test_a_rayjobs_cluster_spec_gets_the_cluster_rules_with_its_own_path() -> None:
    body = rayjob(RULES, False)
    body["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["idleTimeoutSeconds"] = 10
    assert any(
        e.startswith("spec.rayClusterSpec.workerGroupSpecs[0].idleTimeoutSeconds")
        for e in validate_rayjob(body)
    )


# --- the head Ingress -----------------------------------------------------------------------------


def test_the_ingress_with_kuberay_v1_7_defaults() -> None:
    body = cluster()
    body["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "nginx", "team": "a"}
    body["spec"]["headGroupSpec"]["enableIngress"] = True
    built = ingress.build_ingress(body)
    assert built["metadata"]["name"] == "demo-head-ingress"
    assert built["metadata"]["annotations"] == {"team": "a"}
    assert built["metadata"]["labels"] == {
        "ray.io/cluster": "demo",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert built["spec"] == {
        "ingressClassName": "nginx",
        "rules": [
            {
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "demo-head-svc", "port": {"number": 8265}}},
                        }
                    ]
                }
            }
        ],
    }


def test_ingress_options_set_host_path_type_and_tls() -> None:
    body = cluster()
    tls = [{"hosts": ["ray.example.com"], "secretName": "tls"}]
    body["spec"]["headGroupSpec"].update(
        enableIngress=True,
        ingressOptions={"host": "ray.example.com", "path": "/ray", "pathType": "Exact", "tls": tls},
    )
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 9999}
    ]
    spec = ingress.build_ingress(body)["spec"]
    rule = spec["rules"][0]
    assert rule["host"] == "ray.example.com" and spec["tls"] == tls
    assert rule["http"]["paths"][0]["path"] == "/ray" and rule["http"]["paths"][0]["pathType"] == "Exact"
    assert rule["http"]["paths"][0]["backend"]["service"]["port"]["number"] == 9999
    assert unimplemented_fields(body) == []
    body["spec"]["headGroupSpec"]["enableIngress"] = False
    assert unimplemented_fields(body) == ["spec.headGroupSpec.ingressOptions"]


def test_a_live_ingress_is_brought_back_but_keeps_a_defaulted_class() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["enableIngress"] = True
    wanted = ingress.build_ingress(body)
    live = copy.deepcopy(wanted)
    live["spec"]["ingressClassName"] = "default-class"  # set by a DefaultIngressClass admission
    assert not ingress.needs_update(live, wanted)
    live["spec"]["rules"][0]["host"] = "changed.example.com"
    live["metadata"]["annotations"] = {"stale": "x"}
    assert ingress.needs_update(live, wanted)
    fixed = ingress.updated(live, wanted)
    assert fixed["spec"]["rules"] == wanted["spec"]["rules"]
    assert fixed["spec"]["ingressClassName"] == "default-class"
    assert fixed["metadata"]["annotations"] == {}


# --- serveService ---------------------------------------------------------------------------------


def service_with(serve_service: dict[str, Any] | None, strategy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"rayClusterConfig": copy.deepcopy(cluster()["spec"])}
    if serve_service is not None:
        spec["serveService"] = serve_service
    if strategy:
        spec["upgradeStrategy"] = {"type": strategy}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "svc", "namespace": "team-a", "uid": "s1"},
        "spec": spec,
    }


def serving_cluster() -> dict[str, Any]:
    body = cluster()
    body["metadata"]["name"] = "svc-abcde"
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "serve", "containerPort": 8000},
        {"name": "serve-grpc", "containerPort": 9000},
        {"name": "dashboard", "containerPort": 8265},
    ]
    return body


CUSTOM = {
    "metadata": {
        "name": "fruit-serve",
        "namespace": "elsewhere",
        "labels": {"team": "fruit", "ray.io/originated-from-crd": "mine"},
        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
    },
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "ignored"},
        "ports": [{"name": "serve-grpc", "port": 9000, "appProtocol": "kubernetes.io/h2c"}],
    },
}


def test_a_custom_serve_service_keeps_the_users_settings_and_gets_our_selector() -> None:
    service = service_with(copy.deepcopy(CUSTOM))
    _, serve = build_service_services(service, serving_cluster())
    meta, spec = serve["metadata"], serve["spec"]
    assert meta["name"] == "fruit-serve" == serve_service_name(service)
    assert meta["namespace"] == "team-a"
    assert meta["annotations"] == {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
    assert meta["labels"]["team"] == "fruit"
    assert meta["labels"]["ray.io/originated-from-crd"] == "RayService"  # ours win
    assert meta["ownerReferences"][0]["uid"] == "s1"
    assert spec["type"] == "LoadBalancer"
    assert spec["selector"] == {"ray.io/cluster": "svc-abcde", "ray.io/serve": "true"}
    # The head's serving ports, the user's definition where the names meet.
    assert spec["ports"] == [
        {"name": "serve", "port": 8000},
        {"name": "serve-grpc", "port": 9000, "appProtocol": "kubernetes.io/h2c"},
    ]


def test_without_serving_ports_on_the_head_the_users_ports_stay() -> None:
    service = service_with({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})
    body = serving_cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 8265}
    ]
    _, serve = build_service_services(service, body)
    assert serve["metadata"]["name"] == "svc-serve-svc"
    assert serve["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8000}]
    assert serve["spec"]["type"] == "ClusterIP"


def test_incremental_upgrades_do_not_use_a_custom_serve_service_and_say_so() -> None:
    service = service_with(copy.deepcopy(CUSTOM), "NewClusterWithIncrementalUpgrade")
    _, serve = build_service_services(service, serving_cluster())
    assert serve["metadata"]["name"] == "svc-serve-svc"
    assert unimplemented_fields(service) == ["spec.serveService"]
    assert unimplemented_fields(service_with(copy.deepcopy(CUSTOM))) == []


def test_kuberays_deprecated_rayservice_thresholds_are_warned_not_ignored_silently() -> None:
    service = {"kind": "RayService", "spec": {"serviceUnhealthySecondThreshold": 900, "serveConfigV2": ""}}
    assert unimplemented_fields(service) == ["spec.serviceUnhealthySecondThreshold"]
    service["spec"]["deploymentUnhealthySecondThreshold"] = 300
    assert unimplemented_fields(service) == [
        "spec.serviceUnhealthySecondThreshold",
        "spec.deploymentUnhealthySecondThreshold",
    ]
