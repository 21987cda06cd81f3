"""The operator in Kueue-API mode (kueue.x-k8s.io/v1beta2, Kueue's own CRDs) scoped to ``kq-*``
namespaces, and per-test Kueue quota objects named after the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.queue.conftest import Quota, running_operator
from tests.integration.ray.kubehelpers import Kube

KUEUE_TEST_NAMESPACE_PREFIX = "kq"
KUEUE_API = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def namespace_prefix() -> str:
    return KUEUE_TEST_NAMESPACE_PREFIX


@pytest.fixture(scope="session")
def kueue_crds(control_plane: Any) -> None:
    from rayquota.localcluster import kueue_crds

    kueue_crds.install(control_plane)


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def kueue_operator(crds_installed: None, kueue_crds: None) -> Iterator[None]:
    with running_operator(KUEUE_TEST_NAMESPACE_PREFIX, {"RAYQUOTA_QUEUE_API": "kueue"}):
        yield


@pytest.fixture
def kube(control_plane: Any, namespace: str) -> Kube:
    return Kube(control_plane, namespace)


class KueueQuota(Quota):
    """Kueue-shaped quota objects for one test; cluster-scoped ones are named ``<namespace>-<name>``."""

    api_version = KUEUE_API

    def kueue_flavor(self, short: str, **spec: Any) -> str:
        return self.apply("ResourceFlavor", short, {"spec": spec})

    def kueue_cluster_queue(self, short: str, flavor: str, quota: dict[str, Any], **spec: Any) -> str:
        """``namespaceSelector: {}`` (every namespace) unless given: unset, Kueue admits from none."""
        spec.setdefault("namespaceSelector", {})
        group = {
            "coveredResources": sorted(quota),
            "flavors": [
                {
                    "name": flavor,
                    "resources": [{"name": r, "nominalQuota": q} for r, q in sorted(quota.items())],
                }
            ],
        }
        return self.apply("ClusterQueue", short, {"spec": {"resourceGroups": [group], **spec}})


@pytest.fixture
def kueue_quota(control_plane: Any, namespace: str) -> Iterator[KueueQuota]:
    q = KueueQuota(control_plane, namespace)
    try:
        yield q
    finally:
        q.delete_all()


def kueue_workload(name: str, queue: str, cpu: str, *, priority: int | None = None) -> dict[str, Any]:
    """A Workload as Kueue's perf runner writes one: no owner, one pod set, a template."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"name": name}, "spec": spec}
