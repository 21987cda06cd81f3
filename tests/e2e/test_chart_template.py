"""`helm lint` and `helm template`: what the chart renders for each mode, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from rayquota.operator.webhooks.configurations import (
    TIMEOUT_SECONDS,
    queued_kind_rules,
    webhook_configurations,
)
from tests.e2e.chart import CHART, REPO, configuration_of, find, helm, render, settings_of


# The queued kinds' API groups and resources, as the integration records declare them.
def kinds_of(hook: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (group, kind) for rule in hook["rules"] for group in rule["apiGroups"] for kind in rule["resources"]
    }


QUEUED_KINDS = kinds_of({"rules": queued_kind_rules(["CREATE"])})


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def crd_names(objects: list[dict[str, Any]]) -> set[str]:
    return {crd["metadata"]["name"] for crd in find(objects, "CustomResourceDefinition")}


def test_the_chart_lints_strictly() -> None:
    for values in ((), ("reconcilers.enabled=false",), ("webhooks.certManager.enabled=true",)):
        sets = [arg for value in values for arg in ("--set", value)]
        lint = helm("lint", "--strict", str(CHART), *sets)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_helm_says_nothing_about_symbolic_links() -> None:
    """The chart's CRDs are copies written by `rayquota crds`, not links Helm warns about."""
    for args in (
        ("template", "rq", str(CHART), "--include-crds"),
        ("lint", str(CHART)),
        ("show", "crds", str(CHART)),
    ):
        result = helm(*args)
        assert result.returncode == 0, result.stderr
        assert "symbolic link" not in result.stdout + result.stderr, (args, result.stderr[:500])


def test_full_mode_renders_the_operator_its_crds_and_its_webhooks() -> None:
    objects = render()
    generated = {
        p.stem.split("_", 1)[1] + "." + p.stem.split("_", 1)[0] for p in (REPO / "crds").glob("*.yaml")
    }
    assert crd_names(objects) == generated
    assert {"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"} <= crd_names(objects)

    [deployment] = find(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    assert {p["name"] for p in container["ports"]} == {"metrics", "health", "webhook", "visibility"}
    assert env_of(deployment) == {}  # every setting is in the configuration file
    operator = settings_of(objects).operator
    assert operator.webhooks is not None and operator.webhooks.port == 9443
    assert operator.webhooks.bind == "0.0.0.0"
    assert operator.reconcilers_enabled
    assert tuple(operator.queue.labels.queue_label_keys) == (
        "rayquota.io/queue-name",
        "kueue.x-k8s.io/queue-name",
    )
    assert not operator.queue.labels.manage_jobs_without_queue_name
    keeper = operator.webhooks.keeper
    assert keeper is not None and keeper.secret == "rq-rayquota-webhook-cert"
    assert keeper.hosts == ("rq-rayquota-webhook.rayquota-system.svc",)
    assert keeper.configurations == ("rq-rayquota",) and keeper.namespace == "rayquota-system"

    services = {s["metadata"]["name"]: s for s in find(objects, "Service")}
    assert services["rq-rayquota-webhook"]["spec"]["ports"] == [
        {"name": "webhook", "port": 443, "targetPort": "webhook"}
    ]
    assert services["rq-rayquota-metrics"]["spec"]["ports"][0]["port"] == 8080
    assert not list(find(objects, "ServiceMonitor"))
    [secret] = find(objects, "Secret", "rq-rayquota-webhook-cert")
    assert "data" not in secret  # the operator fills it; the chart never overwrites it


def test_the_pending_workloads_api_is_registered_with_its_grants() -> None:
    objects = render()
    [api] = find(objects, "APIService")
    assert api["metadata"]["name"] == "v1alpha1.visibility.rayquota.io"
    assert api["spec"]["service"] == {
        "name": "rq-rayquota-visibility",
        "namespace": "rayquota-system",
        "port": 443,
    }
    [service] = find(objects, "Service", "rq-rayquota-visibility")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "visibility"}]
    [role] = find(objects, "ClusterRole", "rq-rayquota-pending-workloads-viewer")
    assert role["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert role["rules"][0]["resources"] == ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"]
    [delegator] = find(objects, "ClusterRoleBinding", "rq-rayquota-visibility-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    [reader] = find(objects, "RoleBinding", "rq-rayquota-visibility-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    visibility = settings_of(objects).operator.visibility
    assert visibility is not None and (visibility.port, visibility.bind, visibility.loopback) == (
        8082,
        "0.0.0.0",
        False,
    )

    kueue = render("kueueApi.enabled=true")
    assert sorted(a["metadata"]["name"] for a in find(kueue, "APIService")) == [
        "v1beta1.visibility.kueue.x-k8s.io",
        "v1beta2.visibility.kueue.x-k8s.io",
    ]
    off = render("visibility.enabled=false")
    assert not list(find(off, "APIService")) and settings_of(off).operator.visibility is None


def test_ray_webhooks_see_only_labelled_objects_and_fail_closed() -> None:
    objects = render()
    [mutating] = find(objects, "MutatingWebhookConfiguration")
    [validating] = find(objects, "ValidatingWebhookConfiguration")
    ray_hooks = [*mutating["webhooks"][:2], *validating["webhooks"][:2]]
    # one per honoured queue label, the ClusterQueues' and the Cohorts' (no pod gate: our reconcilers')
    assert len(mutating["webhooks"]) == 4
    for hook, key in zip(ray_hooks, ["rayquota.io/queue-name", "kueue.x-k8s.io/queue-name"] * 2, strict=True):
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["objectSelector"] == {"matchExpressions": [{"key": key, "operator": "Exists"}]}
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "rayquota-system"],
            }
        ]
        assert kinds_of(hook) == QUEUED_KINDS
        assert hook["clientConfig"]["service"]["name"] == "rq-rayquota-webhook"
        assert "caBundle" not in hook["clientConfig"]  # the operator patches it in
    # CREATE: born suspended; UPDATE: a gate the new body leaves out is carried over.
    assert [{op for r in h["rules"] for op in r["operations"]} for h in mutating["webhooks"][:2]] == [
        {"CREATE", "UPDATE"}
    ] * 2
    assert [{op for r in h["rules"] for op in r["operations"]} for h in validating["webhooks"][:2]] == [
        {"UPDATE"}
    ] * 2
    # The paths the queue integration's handlers serve (rayquota/operator/webhooks/server.py).
    assert {h["clientConfig"]["service"]["path"] for h in mutating["webhooks"][:2]} == {"/mutate-ray"}
    assert {h["clientConfig"]["service"]["path"] for h in validating["webhooks"][:3]} == {"/validate-ray"}
    # Children of RayJobs/RayServices without the label: checked, but never blocked when down.
    children = validating["webhooks"][2]
    assert children["failurePolicy"] == "Ignore"
    assert children["objectSelector"]["matchExpressions"][0]["key"] == "ray.io/originated-from-crd"
    queues = validating["webhooks"][3]
    assert queues["rules"][0]["apiGroups"] == ["rayquota.io"]
    assert queues["rules"][0]["resources"] == ["clusterqueues"]
    assert queues["failurePolicy"] == "Fail"
    assert queues["clientConfig"]["service"]["path"] == "/validate-clusterqueue"
    # Called as a mutating webhook too: it answers before the CRD schema (words, not a regex).
    words = mutating["webhooks"][2]
    assert words["rules"] == queues["rules"]
    assert words["clientConfig"]["service"]["path"] == "/mutate-clusterqueue"
    # A Cohort's quota is checked as a ClusterQueue's, the same two ways.
    cohorts, cohort_words = validating["webhooks"][4], mutating["webhooks"][3]
    assert cohorts["rules"] == cohort_words["rules"]
    assert cohorts["rules"][0]["apiGroups"] == ["rayquota.io"]
    assert cohorts["rules"][0]["resources"] == ["cohorts"]
    assert cohorts["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert cohorts["failurePolicy"] == cohort_words["failurePolicy"] == "Fail"
    assert cohorts["clientConfig"]["service"]["path"] == "/validate-cohort"
    assert cohort_words["clientConfig"]["service"]["path"] == "/mutate-cohort"


def test_the_chart_sends_the_queue_objects_where_the_operator_registers_them() -> None:
    """The chart's and the loopback operator's configurations (webhooks/configurations.py) send
    the same cluster-scoped queue objects, with the same operations, to the same handlers, and
    give them the same time to answer."""

    def routes(hooks: list[dict[str, Any]], path_of: Any) -> set[tuple[str, str, str, str]]:
        return {
            (group, resource, ",".join(sorted(rule["operations"])), path_of(hook))
            for hook in hooks
            for rule in hook["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            if resource in ("clusterqueues", "cohorts")
        }

    objects = render()
    chart = [
        *next(find(objects, "MutatingWebhookConfiguration"))["webhooks"],
        *next(find(objects, "ValidatingWebhookConfiguration"))["webhooks"],
    ]
    mutating, validating = webhook_configurations("https://127.0.0.1:1", "Q0E=", ("rayquota.io/queue-name",))
    operator = [*mutating["webhooks"], *validating["webhooks"]]
    from_chart = routes(chart, lambda h: h["clientConfig"]["service"]["path"])
    from_operator = routes(operator, lambda h: h["clientConfig"]["url"].removeprefix("https://127.0.0.1:1"))
    assert from_chart == from_operator
    assert {(resource, path) for _, resource, _, path in from_chart} == {
        ("clusterqueues", "/mutate-clusterqueue"),
        ("clusterqueues", "/validate-clusterqueue"),
        ("cohorts", "/mutate-cohort"),
        ("cohorts", "/validate-cohort"),
    }
    # And they wait for the operator alike (configurations.TIMEOUT_SECONDS says why so long).
    assert {h["timeoutSeconds"] for h in [*chart, *operator]} == {TIMEOUT_SECONDS}


def test_admission_only_mode_installs_no_ray_crds_and_turns_the_reconcilers_off() -> None:
    objects = render("reconcilers.enabled=false")
    # KubeRay's chart owns the ray.io CRDs there; ours are all that is installed.
    generated = {p.stem.split("_", 1)[1] + ".rayquota.io" for p in (REPO / "crds").glob("rayquota.io_*.yaml")}
    assert crd_names(objects) == generated
    [_deployment] = find(objects, "Deployment")
    assert not settings_of(objects).operator.reconcilers_enabled
    # The webhooks still gate KubeRay's objects.
    [mutating] = find(objects, "MutatingWebhookConfiguration")
    assert kinds_of(mutating["webhooks"][0]) == QUEUED_KINDS
    # And hold the pods of a queued RayService's clusters at a scheduling gate (lifted by a patch).
    [pod_gate] = [h for h in mutating["webhooks"] if h["name"].startswith("pod-gate")]
    assert pod_gate["failurePolicy"] == "Fail"
    assert pod_gate["clientConfig"]["service"]["path"] == "/mutate-pod"
    assert pod_gate["rules"][0]["resources"] == ["pods"] and pod_gate["rules"][0]["operations"] == ["CREATE"]
    ray_pods = {"matchExpressions": [{"key": "ray.io/cluster", "operator": "Exists"}]}
    assert pod_gate["objectSelector"] == ray_pods
    # And the pods of Jobs (a queued RayJob's submitter, whose template KubeRay writes), only
    # those: every other pod is never sent; the system namespaces' never either.
    [job_pod_gate] = [h for h in mutating["webhooks"] if h["name"].startswith("job-pod-gate")]
    assert job_pod_gate["failurePolicy"] == "Fail"
    assert job_pod_gate["clientConfig"]["service"]["path"] == "/mutate-pod"
    job_pods = {"matchExpressions": [{"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]}
    assert job_pod_gate["objectSelector"] == job_pods
    assert "kube-system" in job_pod_gate["namespaceSelector"]["matchExpressions"][0]["values"]
    # A user cannot lift that gate by hand: an UPDATE removing it is judged.
    [validating] = find(objects, "ValidatingWebhookConfiguration")
    [kept] = [h for h in validating["webhooks"] if h["name"].startswith("pod-gate-kept")]
    assert kept["failurePolicy"] == "Fail" and kept["clientConfig"]["service"]["path"] == "/validate-pod"
    assert kept["rules"][0]["operations"] == ["UPDATE"] and kept["objectSelector"] == ray_pods
    [role] = find(objects, "ClusterRole", "rq-rayquota")
    pod_verbs = {v for r in role["rules"] if "pods" in r["resources"] for v in r["verbs"]}
    assert pod_verbs == {"list", "watch", "patch"}


def test_webhooks_can_point_at_a_url_with_a_given_ca() -> None:
    objects = render("webhooks.url=https://127.0.0.1:9443/", "webhooks.caBundle=Q0E=")
    [validating] = find(objects, "ValidatingWebhookConfiguration")
    urls = [h["clientConfig"]["url"] for h in validating["webhooks"]]
    assert urls == [
        "https://127.0.0.1:9443/validate-ray",
        "https://127.0.0.1:9443/validate-ray",
        "https://127.0.0.1:9443/validate-ray",
        "https://127.0.0.1:9443/validate-clusterqueue",
        "https://127.0.0.1:9443/validate-cohort",
    ]
    assert {h["clientConfig"]["caBundle"] for h in validating["webhooks"]} == {"Q0E="}
    assert "rq-rayquota-webhook" not in {s["metadata"]["name"] for s in find(objects, "Service")}
    # A given CA: the operator neither issues a certificate nor patches the configurations.
    assert not list(find(objects, "Secret"))
    assert configuration_of(objects).configuration.internalCertManagement is None


def test_manage_jobs_without_queue_name_sends_every_ray_object_to_the_webhooks() -> None:
    objects = render("queue.manageJobsWithoutQueueName=true")
    [mutating] = find(objects, "MutatingWebhookConfiguration")
    assert len(mutating["webhooks"]) == 3  # every Ray object, the ClusterQueues and the Cohorts
    assert "objectSelector" not in mutating["webhooks"][0]


def test_managed_namespaces_limit_the_webhooks() -> None:
    objects = render("watchNamespaces={team-a,team-b}")
    [mutating] = find(objects, "MutatingWebhookConfiguration")
    assert mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    ]
    [container] = next(find(objects, "Deployment"))["spec"]["template"]["spec"]["containers"]
    assert {"--namespace=team-a", "--namespace=team-b"} <= set(container["args"])


def test_cert_manager_issues_the_certificate_and_injects_the_ca() -> None:
    objects = render("webhooks.certManager.enabled=true")
    [certificate] = find(objects, "Certificate")
    assert certificate["spec"]["secretName"] == "rq-rayquota-webhook-cert"
    assert certificate["spec"]["issuerRef"] == {"name": "rq-rayquota-selfsigned", "kind": "Issuer"}
    assert list(find(objects, "Issuer"))
    for config in (
        *find(objects, "MutatingWebhookConfiguration"),
        *find(objects, "ValidatingWebhookConfiguration"),
    ):
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            "rayquota-system/rq-rayquota-webhook"
        )
    [_deployment] = find(objects, "Deployment")
    webhooks = settings_of(objects).operator.webhooks
    assert webhooks is not None and webhooks.cert_dir == "/etc/rayquota/webhook-cert"
    assert webhooks.keeper is None
    given = render(
        "webhooks.certManager.enabled=true",
        "webhooks.certManager.issuerRef.name=corp-ca",
        "webhooks.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert next(find(given, "Certificate"))["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }
    assert not list(find(given, "Issuer"))


def test_service_monitor_is_optional() -> None:
    [monitor] = find(
        render("metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom"),
        "ServiceMonitor",
    )
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("replicas=0", "at '/replicas': minimum: got 0, want 1"),
        ("reconciler.enabled=false", "additional properties 'reconciler' not allowed"),
        ("reconcilers.enabled=maybe", "at '/reconcilers/enabled'"),
        ("logLevel=warning", "at '/logLevel': value must be one of 'info', 'debug'"),
        ("webhooks.url=http://10.0.0.1", "at '/webhooks/url'"),
        ("webhooks.timeoutSeconds=60", "at '/webhooks/timeoutSeconds': maximum: got 60, want 30"),
        ("watchNamespaces={ray-*}", "at '/watchNamespaces/0'"),
        ("queue.labelKeys=null", "at '/queue': missing property 'labelKeys'"),
        ("queue.labelKeys={bad key}", "at '/queue/labelKeys/0'"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("replicas=2,leaderElection.enabled=false", "replicas > 1 needs leaderElection.enabled"),
        (
            "leaderElection.renewPeriodSeconds=20",
            "renewPeriodSeconds must be shorter than leaseDurationSeconds",
        ),
    ],
)
def test_bad_values_are_refused_with_a_clear_message(value: str, message: str) -> None:
    result = helm("template", "rq", str(CHART), "--set", value)
    assert result.returncode != 0, f"{value} was accepted"
    assert message in result.stderr, result.stderr
