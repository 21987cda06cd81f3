"""`helm template`: the dashboard block of the chart (dashboard.enabled, its port, Service, the
auth-delegator binding its TokenReview/SubjectAccessReview calls need, its read-only RBAC)."""

from __future__ import annotations

from typing import Any

from tests.e2e.chart import CHART, find, helm, render, settings_of


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = find(objects, "Deployment")
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


def rules_of(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    [role] = find(objects, kind, name)
    return list(role["rules"])


def test_off_by_default() -> None:
    objects = render()
    assert not [o for o in objects if "dashboard" in o["metadata"]["name"]]
    [_deployment] = find(objects, "Deployment")
    assert settings_of(objects).dashboard is None
    assert "dashboard" not in {p["name"] for p in container(objects)["ports"]}


def test_enabled_serves_it_from_the_operator_behind_a_service() -> None:
    objects = render("dashboard.enabled=true", "dashboard.port=9000", "dashboard.service.port=80")
    [deployment] = find(objects, "Deployment")
    dashboard = settings_of(objects).dashboard
    assert dashboard is not None and (dashboard.port, dashboard.bind) == (9000, "0.0.0.0")
    assert dashboard.allowed_origins == () and dashboard.prometheus_url is None
    assert {"name": "dashboard", "containerPort": 9000} in container(objects)["ports"]
    [service] = find(objects, "Service", "rq-rayquota-dashboard")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "dashboard"}]
    # Only the leader serves it and only the leader is Ready: no publishNotReadyAddresses here.
    assert "publishNotReadyAddresses" not in service["spec"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_it_may_review_tokens_and_access_and_read_what_it_shows() -> None:
    objects = render("dashboard.enabled=true")
    account = {"kind": "ServiceAccount", "name": "rq-rayquota", "namespace": "rayquota-system"}
    [delegator] = find(objects, "ClusterRoleBinding", "rq-rayquota-dashboard-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert delegator["subjects"] == [account]
    cluster_rules = rules_of(objects, "ClusterRole", "rq-rayquota-dashboard-cluster")
    assert {
        "apiGroups": ["rayquota.io"],
        "resources": ["resourceflavors", "clusterqueues", "cohorts", "workloadpriorityclasses"],
        "verbs": ["list", "watch"],
    } in cluster_rules
    namespaced = rules_of(objects, "ClusterRole", "rq-rayquota-dashboard")
    assert {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list", "watch"]} in namespaced
    assert {
        "apiGroups": ["ray.io"],
        "resources": ["rayclusters", "rayjobs", "rayservices"],
        "verbs": ["list", "watch"],
    } in namespaced
    for role in [*cluster_rules, *namespaced]:
        assert set(role["verbs"]) <= {"list", "watch"}, role  # read-only
    [binding] = find(objects, "ClusterRoleBinding", "rq-rayquota-dashboard")
    assert binding["subjects"] == [account]


def test_with_watched_namespaces_it_reads_only_there() -> None:
    objects = render("dashboard.enabled=true", "watchNamespaces={team-a,team-b}")
    assert not list(find(objects, "ClusterRoleBinding", "rq-rayquota-dashboard"))
    bindings = list(find(objects, "RoleBinding", "rq-rayquota-dashboard"))
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    assert all(b["roleRef"]["name"] == "rq-rayquota-dashboard" for b in bindings)
    # The queue configuration is cluster-scoped: still read everywhere.
    assert list(find(objects, "ClusterRoleBinding", "rq-rayquota-dashboard-cluster"))


def test_kueue_api_mode_reads_kueues_objects() -> None:
    objects = render("dashboard.enabled=true", "kueueApi.enabled=true")
    groups = {g for r in rules_of(objects, "ClusterRole", "rq-rayquota-dashboard") for g in r["apiGroups"]}
    assert "kueue.x-k8s.io" in groups and "rayquota.io" not in groups


def test_origins_and_prometheus_reach_the_operator() -> None:
    objects = render(
        "dashboard.enabled=true",
        "dashboard.allowedOrigins={https://rq.example.com,http://127.0.0.1:18090}",
        "dashboard.prometheusUrl=http://prometheus.monitoring:9090",
    )
    dashboard = settings_of(objects).dashboard
    assert dashboard is not None
    assert dashboard.allowed_origins == ("https://rq.example.com", "http://127.0.0.1:18090")
    assert dashboard.prometheus_url == "http://prometheus.monitoring:9090"


def test_bad_values_are_refused_by_name() -> None:
    cases = {
        "dashboard.port=8080": "dashboard.port=8080 is already the metrics, health or webhook port",
        "dashboard.port=70000": "/dashboard/port",
        "dashboard.prometheusUrl=prometheus:9090": "/dashboard/prometheusUrl",
        "dashboard.allowedOrigins={https://rq.example.com/path}": "/dashboard/allowedOrigins/0",
        "dashboard.service.type=Ingress": "/dashboard/service/type",
    }
    for value, message in cases.items():
        result = helm("template", "rq", str(CHART), "--set", "dashboard.enabled=true", "--set", value)
        assert result.returncode != 0, value
        assert message in result.stderr, (value, result.stderr)


def test_the_chart_lints_strictly_with_the_dashboard() -> None:
    lint = helm("lint", "--strict", str(CHART), "--set", "dashboard.enabled=true")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_kuberays_values_govern_it_like_the_rest_of_the_chart() -> None:
    # KubeRay's watchNamespace: the dashboard reads only there, as the operator does.
    objects = render("dashboard.enabled=true", "watchNamespace={team-c}")
    assert not list(find(objects, "ClusterRoleBinding", "rq-rayquota-dashboard"))
    [binding] = find(objects, "RoleBinding", "rq-rayquota-dashboard")
    assert binding["metadata"]["namespace"] == "team-c"
    # KubeRay's rbacEnable=false: no RBAC object from the chart, the dashboard's included.
    objects = render("dashboard.enabled=true", "rbacEnable=false")
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding", "RoleBinding")]
    assert list(find(objects, "Service", "rq-rayquota-dashboard"))


def test_a_namespace_only_install_refuses_it_by_name() -> None:
    # The dashboard needs cluster-scoped grants (ClusterQueues, TokenReview) that such an
    # install never creates.
    values = ("--set", "dashboard.enabled=true", "--set", "singleNamespaceInstall=true")
    result = helm("template", "rq", str(CHART), *values)
    assert result.returncode != 0
    assert "dashboard.enabled=true needs cluster-scoped grants" in result.stderr, result.stderr
