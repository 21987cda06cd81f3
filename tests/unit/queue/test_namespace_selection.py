"""A ClusterQueue's unset namespaceSelector: no namespace in Kueue's API (its nil selector), every
namespace in rayquota.io's, which is warned about at admission and in the Active condition."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.kueue import namespace_selection
from rayquota.operator.queue.status import cluster_queue_status
from rayquota.operator.webhooks.review import validate_cluster_queue
from rayquota.queueing import (
    Admit,
    Engine,
    LocalQueue,
    Pending,
    PodSet,
    ResourceFlavor,
    Workload,
)

GROUPS = [
    {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 9}]}],
    }
]


def _cluster_queue(api_version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {"resourceGroups": GROUPS, **spec},
    }


KUEUE = "kueue.x-k8s.io/v1beta2"
RAYQUOTA = "rayquota.io/v1alpha1"


def _decision(cq_body: dict[str, Any]) -> Admit | Pending:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default-flavor"))
    engine.upsert_cluster_queue(converter.cluster_queue(cq_body))
    engine.upsert_local_queue(LocalQueue("team", "user-queue", "cluster-queue"))
    engine.upsert_namespace("team", {"kubernetes.io/metadata.name": "team"})
    engine.add_workload(Workload("team", "wl", "user-queue", (PodSet.of("main", 1, {"cpu": 1}),)))
    decisions = [d for d in engine.run_cycle(0.0) if isinstance(d, Admit | Pending)]
    assert len(decisions) == 1
    return decisions[0]


def test_kueue_cluster_queue_without_a_selector_admits_from_no_namespace() -> None:
    decision = _decision(_cluster_queue(KUEUE))
    assert isinstance(decision, Pending)
    assert "ClusterQueue cluster-queue selects no namespace" in decision.reason
    assert "namespaceSelector: {}" in decision.reason


def test_kueue_v1beta1_cluster_queue_without_a_selector_too() -> None:
    assert isinstance(_decision(_cluster_queue("kueue.x-k8s.io/v1beta1")), Pending)


def test_kueue_cluster_queue_with_the_empty_selector_admits_from_every_namespace() -> None:
    assert isinstance(_decision(_cluster_queue(KUEUE, namespaceSelector={})), Admit)


def test_kueue_cluster_queue_with_a_selector_admits_from_the_selected_namespaces() -> None:
    selected = {"matchLabels": {"kubernetes.io/metadata.name": "team"}}
    assert isinstance(_decision(_cluster_queue(KUEUE, namespaceSelector=selected)), Admit)
    other = {"matchLabels": {"kubernetes.io/metadata.name": "other"}}
    decision = _decision(_cluster_queue(KUEUE, namespaceSelector=other))
    assert isinstance(decision, Pending)
    assert decision.reason == "namespace team is not selected by ClusterQueue cluster-queue"


def test_rayquota_cluster_queue_without_a_selector_keeps_every_namespace() -> None:
    assert isinstance(_decision(_cluster_queue(RAYQUOTA)), Admit)


def test_scenario_specs_keep_every_namespace_unless_asked() -> None:
    assert converter.cluster_queue_from_spec("q", {"resourceGroups": GROUPS}).namespace_selector is None
    kueue = converter.cluster_queue_from_spec("q", {"resourceGroups": GROUPS}, unset_selects_nothing=True)
    assert kueue.namespace_selector is not None and not kueue.namespace_selector.matches({})


def test_webhook_warns_on_a_rayquota_cluster_queue_without_a_selector() -> None:
    verdict = validate_cluster_queue(_cluster_queue(RAYQUOTA))
    assert verdict.allowed
    assert verdict.warning is not None
    assert "spec.namespaceSelector is unset" in verdict.warning and "namespaceSelector: {}" in verdict.warning
    assert validate_cluster_queue(_cluster_queue(RAYQUOTA, namespaceSelector={})).warning is None
    assert validate_cluster_queue(_cluster_queue(KUEUE)).warning is None  # Kueue's meaning, no surprise


def test_invalid_cluster_queue_is_still_refused() -> None:
    bad = _cluster_queue(RAYQUOTA, queueingStrategy="Sometimes")
    assert not validate_cluster_queue(bad).allowed


def test_active_condition_carries_the_warning_while_ready() -> None:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default-flavor"))
    body = _cluster_queue(RAYQUOTA)
    engine.upsert_cluster_queue(converter.cluster_queue(body))
    status = cluster_queue_status(
        None,
        engine.cluster_queue_status("cluster-queue"),
        [("default-flavor", "cpu")],
        "2026-01-01T00:00:00Z",
        warning=namespace_selection.unset_selector_warning(body),
    )
    active = next(c for c in status["conditions"] if c["type"] == "Active")
    assert active["status"] == "True" and active["reason"] == "Ready"
    assert active["message"].startswith("Can admit new workloads; warning: spec.namespaceSelector is unset")
