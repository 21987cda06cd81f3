"""Fields asking for security rayquota does not provide are refused where KubeRay v1.7.0 refuses
them with its default feature gates, naming the field and why: by every reconciler's validation
and by the admission webhook."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rayquota.operator.queue import naming
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.ray.raycluster.plan import validate_cluster
from rayquota.operator.ray.raycluster.security_fields import object_refusals, refusals
from rayquota.operator.ray.raycronjob.validation import validate_raycronjob
from rayquota.operator.ray.rayjob.validation import validate_rayjob
from rayquota.operator.ray.rayservice.validation import validate_rayservice
from rayquota.operator.webhooks import review
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.ray.fixtures import BASE_CLUSTER, cluster
from tests.unit.ray.rayservice_fixtures import service

TOKEN_AUTH = {"mode": "token", "enableK8sTokenAuth": True}


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("networkPolicy", {"mode": "DenyAllIngress"}, "RayClusterNetworkPolicy"),
        ("networkPolicy", {}, "no NetworkPolicies are made"),
        ("tlsOptions", {"enabled": True}, "RayClusterMTLS"),
        # KubeRay refuses any tlsOptions while its gate is off, even one turned off.
        ("tlsOptions", {"enabled": False}, "mutual TLS"),
        ("historyServerOptions", {"collectorOptions": {"image": "c:1"}}, "RayClusterHistoryServer"),
    ],
)
def test_a_gated_security_field_is_refused_by_the_raycluster_validation(
    field: str, value: dict[str, Any], why: str
) -> None:
    errors = validate_cluster(cluster(**{field: value}))
    assert len(errors) == 1, errors
    shown = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    assert errors[0].startswith(f"spec.{field} is refused (set to {shown}): "), errors
    assert why in errors[0]


def test_an_unset_or_null_security_field_is_not_refused() -> None:
    assert validate_cluster(cluster()) == []
    assert (
        refusals({"networkPolicy": None, "tlsOptions": None, "authOptions": {"mode": "token"}}, "spec") == []
    )
    assert refusals({"authOptions": {"mode": "token", "enableK8sTokenAuth": False}}, "spec") == []


@pytest.mark.parametrize("owner", ["RayJob", "RayService"])
def test_kubernetes_delegated_token_auth_is_refused_where_kuberay_refuses_it(owner: str) -> None:
    [error] = refusals({"authOptions": TOKEN_AUTH}, "spec", owner)
    assert error.startswith("spec.authOptions.enableK8sTokenAuth: true is refused: ")
    assert f"KubeRay does not support Kubernetes token auth for a {owner}" in error


def test_kubernetes_delegated_token_auth_on_a_raycluster_is_not_refused() -> None:
    assert refusals({"authOptions": TOKEN_AUTH}, "spec", "RayCluster") == []


def test_each_kind_names_the_field_by_its_path_in_the_object() -> None:
    job = {
        "metadata": {"name": "job"},
        "spec": {
            "entrypoint": "python x.py",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {**copy.deepcopy(BASE_CLUSTER["spec"]), "tlsOptions": {"enabled": True}},
        },
    }
    assert (
        [e for e in validate_rayjob(job) if "refused" in e]
        == [e for e in validate_rayjob(job) if e.startswith("spec.rayClusterSpec.tlsOptions is refused")]
        != []
    )

    def add_policy(config: dict[str, Any]) -> None:
        config["networkPolicy"] = {"mode": "DenyAll"}

    problems = validate_rayservice(service(add_policy))
    assert any(p.startswith("spec.rayClusterConfig.networkPolicy is refused") for p in problems), problems

    cron = {
        "metadata": {"name": "cron"},
        "spec": {"schedule": "* * * * *", "jobTemplate": job["spec"]},
    }
    assert any(
        e.startswith("spec.jobTemplate.rayClusterSpec.tlsOptions is refused")
        for e in validate_raycronjob(cron)
    )
    assert (
        object_refusals("RayCronJob", cron)
        == [
            e for e in object_refusals("RayCronJob", cron) if e.startswith("spec.jobTemplate.rayClusterSpec.")
        ]
        != []
    )
    assert object_refusals("Job", {"spec": {"networkPolicy": {}}}) == []


def _objects() -> QueueObjects:
    kinds = {k: FakeInformer() for k in ("RayCluster", "RayJob", "RayService")}
    return QueueObjects(naming.QueueSettings(), kinds, FakeInformer(), fake_pod_informers())  # type: ignore[arg-type]


def test_the_webhook_refuses_a_queued_object_asking_for_security_on_create_and_update() -> None:
    job = bodies.rayjob()
    job["spec"]["rayClusterSpec"]["networkPolicy"] = {"mode": "DenyAll"}
    verdict = review.mutate("RayJob", job, _objects())
    assert not verdict.allowed
    assert "spec.rayClusterSpec.networkPolicy is refused" in verdict.message

    old = bodies.rayjob()
    new = copy.deepcopy(old)
    new["spec"]["rayClusterSpec"]["historyServerOptions"] = {}
    gate = review.validate_gate("RayJob", new, old, _objects(), None)  # type: ignore[arg-type]
    assert not gate.allowed and "spec.rayClusterSpec.historyServerOptions is refused" in gate.message
    assert review.mutate("RayJob", bodies.rayjob(), _objects()).allowed


def test_a_long_refused_value_is_shown_cut_short() -> None:
    rules = [{"from": [{"podSelector": {"matchLabels": {"team": f"t{i}"}}}]} for i in range(10)]
    [error] = refusals({"networkPolicy": {"head": {"ingressRules": rules}}}, "spec")
    shown = error.removeprefix("spec.networkPolicy is refused (set to ").partition("): ")[0]
    assert shown.startswith('{"head": {"ingressRules": [{"from": ') and shown.endswith("...")
    assert len(shown) == 80


def test_the_webhook_refuses_token_auth_kuberay_refuses_naming_the_field_and_value() -> None:
    """KubeRay's auth rules (validation.go): Kubernetes tokens need mode token, Ray 2.55.0 and no
    Secret of the user's. The reconciler refused them; the webhook now refuses them at admission."""
    cluster = bodies.raycluster(**{naming.QUEUE_LABEL: "q"})
    cluster["spec"]["rayVersion"] = "2.60.0"
    cluster["spec"]["authOptions"] = {"enableK8sTokenAuth": True}
    verdict = review.mutate("RayCluster", cluster, _objects())
    assert not verdict.allowed
    assert "spec.authOptions.enableK8sTokenAuth is true but spec.authOptions.mode is not 'token'" in (
        verdict.message
    )
    cluster["spec"]["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True, "secretName": "mine"}
    verdict = review.mutate("RayCluster", cluster, _objects())
    assert not verdict.allowed and "spec.authOptions.secretName is set ('mine')" in verdict.message
    cluster["spec"]["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True}
    cluster["spec"]["rayVersion"] = "2.54.0"
    verdict = review.mutate("RayCluster", cluster, _objects())
    assert not verdict.allowed and "spec.rayVersion is 2.54.0: 2.55.0 or later" in verdict.message
    cluster["spec"]["rayVersion"] = "2.55.0"
    assert review.mutate("RayCluster", cluster, _objects()).allowed

    service = bodies.rayservice()
    service["metadata"]["labels"] = {naming.QUEUE_LABEL: "q"}
    service["spec"]["rayClusterConfig"]["rayVersion"] = "2.60.0"
    service["spec"]["rayClusterConfig"]["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True}
    verdict = review.mutate("RayService", service, _objects())
    assert not verdict.allowed
    assert "spec.rayClusterConfig.authOptions.enableK8sTokenAuth: true is refused" in verdict.message
