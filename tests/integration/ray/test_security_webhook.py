"""The API server refuses, through rayquota's admission webhook, a queued object whose cluster spec
asks for security rayquota does not provide (test_kuberay_production checks the reconcilers
refuse it without the webhook). An operator of its own, serving the webhooks on 127.0.0.1, watches
this module's namespaces only."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.webhook_settings import WebhookSettings
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.test_kuberay_production import CLUSTER_SPEC, raycluster, rayjob
from tests.operator_thread import operator_thread

PREFIX = "raysec"
QUEUE_LABEL = {"rayquota.io/queue-name": "team"}


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def webhook_operator(crds_installed: None) -> Iterator[None]:
    config = OperatorConfig(version="test-1", dashboard_resolver="local", webhooks=WebhookSettings.loopback())
    with operator_thread(config, [f"{PREFIX}-*"]):
        yield


@pytest.fixture
def kube(control_plane: Any, namespace: str, webhook_operator: None) -> Kube:
    kube = Kube(control_plane, namespace)
    # The operator is ready once its caches sync; its webhook configurations are registered
    # after, and the API server calls them once its own cache has them (failurePolicy Ignore:
    # until then a refused object is let in).
    wait_for("the API server calling rayquota's webhooks", lambda: _webhook_called(kube), 60)
    return kube


def _webhook_called(kube: Kube) -> bool:
    probe = raycluster("probe", tlsOptions={"enabled": True})
    probe["metadata"]["labels"] = dict(QUEUE_LABEL)
    out = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
    return out.returncode != 0 and "admission webhook" in str(out.stderr)


def refused(kube: Kube, manifest: dict[str, Any]) -> str:
    result = kube.kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"{manifest['kind']} was accepted"
    return str(result.stderr)


def test_the_webhook_refuses_a_queued_raycluster_asking_for_network_isolation(kube: Kube) -> None:
    cluster = raycluster("isolated", networkPolicy={"mode": "DenyAll"})
    cluster["metadata"]["labels"] = dict(QUEUE_LABEL)
    message = refused(kube, cluster)
    assert "admission webhook" in message, message
    assert 'spec.networkPolicy is refused (set to {"mode": "DenyAll"})' in message, message
    assert kube.get("raycluster", "isolated") is None


def test_the_webhook_refuses_a_queued_rayjob_asking_for_mutual_tls(kube: Kube) -> None:
    spec = copy.deepcopy(CLUSTER_SPEC)
    spec["tlsOptions"] = {"enabled": True}
    job = rayjob("encrypted", rayClusterSpec=spec, shutdownAfterJobFinishes=True)
    job["metadata"]["labels"] = dict(QUEUE_LABEL)
    message = refused(kube, job)
    assert 'spec.rayClusterSpec.tlsOptions is refused (set to {"enabled": true})' in message, message
    assert "mutual TLS" in message, message


def _queued_cluster(name: str, **spec: Any) -> dict[str, Any]:
    cluster = raycluster(name, **spec)
    cluster["metadata"]["labels"] = dict(QUEUE_LABEL)
    return cluster


@pytest.mark.parametrize(
    ("spec", "refusal"),
    [
        (
            {"historyServerOptions": {"collectorOptions": {}}},
            'spec.historyServerOptions is refused (set to {"collectorOptions": {}})',
        ),
        (
            # Ray before 2.52.0 has no token auth: it would run open.
            {"authOptions": {"mode": "token"}},
            "spec.authOptions.mode is 'token' but spec.rayVersion is 2.41.0: 2.52.0 or later",
        ),
        (
            {"authOptions": {"enableK8sTokenAuth": True}, "rayVersion": "2.60.0"},
            "spec.authOptions.enableK8sTokenAuth is true but spec.authOptions.mode is not 'token'",
        ),
        (
            {"authOptions": {"mode": "token", "enableK8sTokenAuth": True}, "rayVersion": "2.54.0"},
            "spec.authOptions.enableK8sTokenAuth is true but spec.rayVersion is 2.54.0: 2.55.0 or later",
        ),
    ],
    ids=["historyServerOptions", "token-mode-old-ray", "k8s-tokens-without-token-mode", "k8s-tokens-old-ray"],
)
def test_the_webhook_refuses_a_queued_raycluster_asking_for_security_it_would_not_get(
    kube: Kube, spec: dict[str, Any], refusal: str
) -> None:
    message = refused(kube, _queued_cluster("asks", **spec))
    assert "admission webhook" in message and refusal in message, message
    assert kube.get("raycluster", "asks") is None


def test_the_webhook_refuses_kubernetes_token_auth_on_a_queued_rayjob(kube: Kube) -> None:
    spec = copy.deepcopy(CLUSTER_SPEC)
    spec["rayVersion"] = "2.60.0"
    spec["authOptions"] = {"mode": "token", "enableK8sTokenAuth": True}
    job = rayjob("tokens", rayClusterSpec=spec, shutdownAfterJobFinishes=True)
    job["metadata"]["labels"] = dict(QUEUE_LABEL)
    message = refused(kube, job)
    assert "spec.rayClusterSpec.authOptions.enableK8sTokenAuth: true is refused" in message, message
    assert kube.get("rayjob", "tokens") is None
