"""The composition root (`rayquota.app.main.build`): the operator's components and the web
dashboard on one manager, each given its settings from the configuration."""

from __future__ import annotations

import kubernetes.client

from rayquota.app.main import build
from rayquota.config import build as settings_from
from rayquota.config import load
from rayquota.dashboard.settings import DashboardSettings
from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.dra.cache import ClaimCache
from rayquota.operator.ray.raycluster import redis_cleanup
from rayquota.operator.ray.vocabulary import labels


def offline_manager() -> Manager:
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted
    return Manager(KubeClient(configuration), NamespaceScope.of(None))


def test_the_dashboard_is_built_beside_the_components_with_the_operators_settings() -> None:
    env = {"RAYQUOTA_QUEUE_API": "kueue", "RAYQUOTA_FAIR_SHARING": "true", "RAYQUOTA_DASHBOARD_PORT": "0"}
    settings = settings_from.settings(load(env=env))
    assert settings.dashboard == DashboardSettings(port=0)
    application = build(offline_manager(), settings.operator, settings.dashboard)
    assert application.dashboard is not None
    assert application.dashboard.cache.api.workloads.group == "kueue.x-k8s.io"
    assert application.describe().endswith("dashboard on 127.0.0.1:0")
    assert "dashboard" not in application.components.describe()


def test_the_process_wide_values_are_set_from_the_configuration() -> None:
    env = {"RAYQUOTA_CREATED_BY_LABEL": "rayquota", "ENABLE_GCS_FT_REDIS_CLEANUP": "false"}
    operator = settings_from.operator_config(load(env=env).configuration)
    try:
        build(offline_manager(), operator)
        assert labels.CREATED_BY_VALUE == "rayquota"
        assert not redis_cleanup.cleanup_enabled()
    finally:
        labels.set_created_by(labels.KUBERAY_CREATED_BY_VALUE)
        redis_cleanup.set_cleanup_enabled(True)


def test_one_claim_source_per_operator_is_handed_to_its_records_and_its_dashboard() -> None:
    """The queue's setup builds the claim source (the claim template and DeviceClass caches) and
    hands it on: every record's demand read, the quantity check (``QueueObjects.claims``) and the
    dashboard's Workload page read that one. A second operator built in the same process has its
    own: nothing is found through the process (once the last operator's cache was, for all)."""
    mappings = '[{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]'
    env = {"RAYQUOTA_DEVICE_CLASS_MAPPINGS": mappings, "RAYQUOTA_DASHBOARD_PORT": "0"}
    settings = settings_from.settings(load(env=env))
    first = build(offline_manager(), settings.operator, settings.dashboard)
    second = build(offline_manager(), settings.operator, settings.dashboard)
    for application in (first, second):
        assert application.components.queue is not None and application.dashboard is not None
        claims = application.components.queue.objects.claims
        assert isinstance(claims, ClaimCache) and claims.claim_templates is not None
        records = [*application.components.queue.objects.adapters.values()]
        records += application.dashboard.cache.records.values()
        assert all(getattr(record, "claims", None) is claims for record in records)
    assert first.components.queue is not None and second.components.queue is not None
    assert first.components.queue.objects.claims is not second.components.queue.objects.claims
