"""KubeRay's Helm values (v1.7.0) in our chart: its values file renders unchanged, each value is
mapped or refused by name, and a namespace-only install grants nothing cluster-scoped."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rayquota.operator.config import OperatorConfig
from rayquota.operator.feature_gates import KUBERAY_GATES, FeatureGates, refusal
from rayquota.operator.permissions import Permission, offline_manager, required_permissions
from rayquota.operator.ray.rayservice.writes import GATEWAY_CLASSES
from tests.e2e.chart import KUBERAY_VALUES, configuration_of, documents, find, render, settings_of, template
from tests.e2e.test_chart_rbac import assert_same, granted, grants

CLUSTER_SCOPED_KINDS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


def container_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = find(objects, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def kuberay_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(KUBERAY_VALUES.read_text())
    return values


def test_kuberays_values_file_renders_our_chart_unchanged_with_each_value_mapped() -> None:
    values = kuberay_values()
    objects = render(files=(KUBERAY_VALUES,))
    [deployment] = find(objects, "Deployment")
    container = container_of(objects)
    settings = settings_of(objects)
    # fullnameOverride / serviceAccount.name / componentOverride
    assert deployment["metadata"]["name"] == "kuberay-operator"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kuberay-operator"
    assert (
        deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        == "kuberay-operator"
    )
    # KubeRay's image cannot run rayquota: the chart's own stands in.
    assert container["image"].startswith("ghcr.io/rayquota/rayquota:")
    # replicas, leaderElectionEnabled, reconcileConcurrency, logging.stdoutEncoder, metrics.enabled
    assert deployment["spec"]["replicas"] == values["replicas"] == 1
    assert "--leader-elect" in container["args"]
    assert settings.operator.workers == 1
    assert settings.log_format == "json"
    assert settings.operator.kuberay_metrics
    # featureGates: passed on as KubeRay's --feature-gates string, which the operator accepts.
    gates = ",".join(f"{g['name']}={str(g['enabled']).lower()}" for g in values["featureGates"])
    assert configuration_of(objects).configuration.kuberay.featureGates == gates
    assert not FeatureGates.parse(gates).enabled("RayCronJob")
    # securityContext, resources, probes: KubeRay's, and requests still fit under its limits.
    assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["limits"] == {"cpu": "100m", "memory": "512Mi"}
    assert container["resources"]["requests"]["cpu"] == "100m"
    assert container["readinessProbe"]["periodSeconds"] == 5
    # Cluster-wide, not namespace-only: the ClusterRoles as usual, and the pending-workloads
    # API's role aggregated into view/edit/admin (the queue is on, so that API is served).
    assert {r["metadata"]["name"] for r in find(objects, "ClusterRole")} == {
        "kuberay-operator",
        "kuberay-operator-cluster",
        "kuberay-operator-pending-workloads-viewer",
    }


def test_the_rbac_of_kuberays_values_is_exactly_what_the_code_uses() -> None:
    objects = render(files=(KUBERAY_VALUES,))
    config = settings_of(objects).operator
    manager, components = offline_manager(config)
    assert "raycronjob" not in components  # KubeRay's file leaves RayCronJob off
    wanted = required_permissions(manager, components, self_issued_cert=True)
    [namespaced] = find(objects, "ClusterRole", "kuberay-operator")
    assert_same("namespaced ClusterRole", granted(namespaced), grants(wanted.namespaced))


@pytest.mark.parametrize("name", sorted(KUBERAY_GATES))
@pytest.mark.parametrize("enabled", [True, False])
def test_each_feature_gate_is_refused_exactly_when_the_operator_refuses_it(name: str, enabled: bool) -> None:
    result = template(f"featureGates[0].name={name}", f"featureGates[0].enabled={str(enabled).lower()}")
    reason = refusal(name, enabled)
    if reason is None:
        assert result.returncode == 0, result.stderr
        objects = documents(result.stdout)
        rendered = configuration_of(objects)
        assert rendered.configuration.kuberay.featureGates == f"{name}={str(enabled).lower()}"
        settings_of(objects)  # the operator accepts it
    else:
        assert result.returncode != 0
        assert f"featureGates: {name}={str(enabled).lower()} is refused" in result.stderr, result.stderr


def test_an_unknown_feature_gate_is_refused_by_name() -> None:
    result = template("featureGates[0].name=RayCronJobs", "featureGates[0].enabled=true")
    assert result.returncode != 0 and 'unknown feature gate "RayCronJobs"' in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("batchScheduler.name=volcano",), "batchScheduler: name: volcano is refused"),
        (("batchScheduler.enabled=true",), "batchScheduler: enabled: true is refused"),
        (("configuration.enabled=true",), "configuration.enabled: true is refused"),
        (("useKubernetesProxy=true",), "useKubernetesProxy: true is refused"),
        (("logging.baseDir=/var/log", "logging.fileName=op.log"), "logging.baseDir / logging.fileName"),
        (("singleNamespaceInstall=true", "kueueApi.enabled=true"), "singleNamespaceInstall with kueueApi"),
        (("reconcileConcurrency=0",), "reconcileConcurrency"),
        (("watchNamespace={Not_A_Namespace}",), "watchNamespace"),
    ],
)
def test_what_rayquota_cannot_honour_is_refused_naming_the_value(
    values: tuple[str, ...], message: str
) -> None:
    result = template(*values)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def single_namespace_needs() -> tuple[frozenset[Permission], frozenset[Permission]]:
    config = OperatorConfig(queue_enabled=False)
    manager, components = offline_manager(config)
    assert "queue" not in components
    wanted = required_permissions(manager, components, self_issued_cert=False)
    return wanted.namespaced, wanted.cluster


def test_a_single_namespace_install_grants_nothing_cluster_scoped() -> None:
    objects = render("singleNamespaceInstall=true", "watchNamespace={team-a,team-b}", namespace="ops")
    assert not [o for o in objects if o["kind"] in CLUSTER_SCOPED_KINDS]
    namespaced, cluster = single_namespace_needs()
    roles = {r["metadata"]["namespace"]: r for r in find(objects, "Role", "rq-rayquota-namespaced")}
    assert sorted(roles) == ["team-a", "team-b"]
    for role in roles.values():
        assert_same("managed namespace Role", granted(role), grants(namespaced))
    bindings = list(find(objects, "RoleBinding", "rq-rayquota-namespaced"))
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    assert all(b["roleRef"]["kind"] == "Role" for b in bindings)
    # The only cluster-scoped read of the Ray reconcilers: a RayService incremental upgrade's
    # GatewayClass check, which such an install cannot grant (docs/install.md says so).
    assert {(p.group, p.resource, p.verb) for p in cluster} == {
        (GATEWAY_CLASSES.group, "gatewayclasses", "get")
    }
    container = container_of(objects)
    assert [a for a in container["args"] if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    operator = settings_of(objects).operator
    assert not operator.queue_enabled
    assert operator.webhooks is None


def test_a_single_namespace_install_manages_its_own_namespace_by_default() -> None:
    objects = render("singleNamespaceInstall=true", namespace="ops")
    assert {r["metadata"]["namespace"] for r in find(objects, "Role")} == {"ops"}
    assert "--namespace=ops" in container_of(objects)["args"]


def test_without_cr_namespaced_rbac_the_managed_namespaces_roles_are_left_to_their_owners() -> None:
    objects = render("singleNamespaceInstall=true", "crNamespacedRbacEnable=false", namespace="ops")
    assert not list(find(objects, "Role", "rq-rayquota-namespaced"))
    assert [r["metadata"]["name"] for r in find(objects, "Role")] == ["rq-rayquota"]  # the Lease's
    assert not [o for o in objects if o["kind"] in CLUSTER_SCOPED_KINDS]


def test_rbac_enable_false_creates_no_rbac_at_all() -> None:
    objects = render("rbacEnable=false")
    assert not [
        o for o in objects if o["kind"] in {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    ]
