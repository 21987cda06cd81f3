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
from tests.integration.ray.kubehelpers import Kube
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
    return Kube(control_plane, namespace)


def refused(kube: Kube, manifest: dict[str, Any]) -> str:
    result = kube.kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"{manifest['kind']} was accepted"
    return str(result.stderr)


def test_the_webhook_refuses_a_queued_raycluster_asking_for_network_isolation(kube: Kube) -> None:
    cluster = raycluster("isolated", networkPolicy={"mode": "DenyAll"})
    cluster["metadata"]["labels"] = dict(QUEUE_LABEL)
    message = refused(kube, cluster)
    assert "admission webhook" in message and "spec.networkPolicy is refused" in message, message
    assert kube.get("raycluster", "isolated") is None


def test_the_webhook_refuses_a_queued_rayjob_asking_for_mutual_tls(kube: Kube) -> None:
    spec = copy.deepcopy(CLUSTER_SPEC)
    spec["tlsOptions"] = {"enabled": True}
    job = rayjob("encrypted", rayClusterSpec=spec, shutdownAfterJobFinishes=True)
    job["metadata"]["labels"] = dict(QUEUE_LABEL)
    message = refused(kube, job)
    assert "spec.rayClusterSpec.tlsOptions is refused" in message and "mutual TLS" in message, message
