"""KubeRay's metric families: series per object, durations on the transitions KubeRay observes."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from rayquota.operator.core import ADDED, DELETED, MODIFIED
from rayquota.operator.ray.kuberay_metrics import FAMILIES, KubeRayMetrics

NOW = 1_767_268_860.0  # 2026-01-01T12:01:00Z
CREATED = "2026-01-01T12:00:00Z"


class Handlers:
    """Stands in for the three informers: keeps the change handlers `watch` registers."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def on_change(self, handler: Any) -> None:
        self.handlers.append(handler)


def wired() -> tuple[KubeRayMetrics, Handlers, Handlers, Handlers]:
    metrics = KubeRayMetrics(wall_clock=lambda: NOW)
    clusters, jobs, services = Handlers(), Handlers(), Handlers()
    metrics.watch(clusters, jobs, services)  # type: ignore[arg-type]
    return metrics, clusters, jobs, services


def obj(
    name: str, status: dict[str, Any] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": CREATED,
            "labels": labels or {},
        },
        "status": status or {},
    }


def send(target: Handlers, event: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    for handler in target.handlers:
        handler(event, new, old)


def samples(metrics: KubeRayMetrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    registry = CollectorRegistry()
    registry.register(metrics)
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def provisioned(value: str) -> dict[str, Any]:
    return {"conditions": [{"type": "RayClusterProvisioned", "status": value}]}


def test_every_family_is_exposed_with_kuberays_name_and_labels() -> None:
    metrics, _, _, _ = wired()
    text = generate_latest(_registry(metrics)).decode()
    for family in FAMILIES:
        assert f"# TYPE {family.name} gauge" in text


def _registry(metrics: KubeRayMetrics) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(metrics)
    return registry


def test_cluster_info_and_provisioned_condition_follow_the_object() -> None:
    metrics, clusters, _, _ = wired()
    send(clusters, ADDED, obj("a", labels={"ray.io/originated-from-crd": "RayJob"}))
    send(clusters, ADDED, obj("b"))
    got = samples(metrics)
    ident = (("name", "a"), ("namespace", "ns"), ("uid", "uid-a"))
    assert (
        got["kuberay_cluster_info"][
            (("name", "a"), ("namespace", "ns"), ("owner_kind", "RayJob"), ("uid", "uid-a"))
        ]
        == 1
    )
    assert (
        got["kuberay_cluster_info"][
            (("name", "b"), ("namespace", "ns"), ("owner_kind", "None"), ("uid", "uid-b"))
        ]
        == 1
    )
    assert got["kuberay_cluster_condition_provisioned"][(("condition", "false"), *ident)] == 1
    send(clusters, MODIFIED, obj("a", provisioned("True")), obj("a"))
    got = samples(metrics)
    assert got["kuberay_cluster_condition_provisioned"] == {
        (("condition", "true"), *ident): 1,
        (("condition", "false"), ("name", "b"), ("namespace", "ns"), ("uid", "uid-b")): 1,
    }


def test_provisioned_duration_only_on_the_transition_and_dropped_with_the_cluster() -> None:
    metrics, clusters, _, _ = wired()
    # Seen already provisioned (a restart's first list): no transition, no duration.
    send(clusters, ADDED, obj("a", provisioned("True")))
    assert "kuberay_cluster_provisioned_duration_seconds" not in samples(metrics)
    send(clusters, MODIFIED, obj("b", provisioned("False")), obj("b"))
    assert "kuberay_cluster_provisioned_duration_seconds" not in samples(metrics)
    send(clusters, MODIFIED, obj("b", provisioned("True")), obj("b", provisioned("False")))
    durations = samples(metrics)["kuberay_cluster_provisioned_duration_seconds"]
    assert durations == {(("name", "b"), ("namespace", "ns"), ("uid", "uid-b")): 60.0}
    send(clusters, DELETED, obj("b", provisioned("True")))
    got = samples(metrics)
    assert "kuberay_cluster_provisioned_duration_seconds" not in got
    assert [labels for labels in got["kuberay_cluster_info"]] == [
        (("name", "a"), ("namespace", "ns"), ("owner_kind", "None"), ("uid", "uid-a"))
    ]


def test_job_execution_duration_on_terminal_and_retrying_with_the_retry_count() -> None:
    metrics, _, jobs, _ = wired()
    running = {"jobDeploymentStatus": "Running", "startTime": "2026-01-01T12:00:30Z", "failed": 1}
    send(jobs, MODIFIED, obj("j", {**running, "jobDeploymentStatus": "Retrying"}), obj("j", running))
    send(jobs, MODIFIED, obj("k", {**running, "jobDeploymentStatus": "Complete"}), obj("k", running))
    # Complete -> Complete (another status write) observes nothing new.
    send(
        jobs,
        MODIFIED,
        obj("m", {**running, "jobDeploymentStatus": "Failed"}),
        obj("m", {**running, "jobDeploymentStatus": "Failed"}),
    )
    got = samples(metrics)
    assert got["kuberay_job_execution_duration_seconds"] == {
        (
            ("job_deployment_status", "Retrying"),
            ("name", "j"),
            ("namespace", "ns"),
            ("retry_count", "1"),
            ("uid", "uid-j"),
        ): 30.0,
        (
            ("job_deployment_status", "Complete"),
            ("name", "k"),
            ("namespace", "ns"),
            ("retry_count", "1"),
            ("uid", "uid-k"),
        ): 30.0,
    }
    assert (
        got["kuberay_job_deployment_status"][
            (("deployment_status", "Failed"), ("name", "m"), ("namespace", "ns"), ("uid", "uid-m"))
        ]
        == 1
    )


def test_service_conditions() -> None:
    metrics, _, _, services = wired()
    status = {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "UpgradeInProgress", "status": "False"}]
    }
    send(services, ADDED, obj("s", status))
    got = samples(metrics)
    ident = (("name", "s"), ("namespace", "ns"), ("uid", "uid-s"))
    assert got["kuberay_service_info"] == {ident: 1}
    assert got["kuberay_service_condition_ready"] == {(("condition", "true"), *ident): 1}
    assert got["kuberay_service_condition_upgrade_in_progress"] == {(("condition", "false"), *ident): 1}
