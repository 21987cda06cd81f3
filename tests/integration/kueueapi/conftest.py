"""The operator in Kueue-API mode (kueue.x-k8s.io/v1beta2, Kueue's own CRDs) scoped to ``kq-*``
namespaces, and per-test Kueue quota objects named after the test's namespace."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.queue.conftest import start_operator
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


@pytest.fixture(scope="session")
def kueue_operator(crds_installed: None, kueue_crds: None) -> Iterator[None]:
    fd, name = tempfile.mkstemp(prefix="rq-dashboards-", suffix=".json")
    os.close(fd)
    dashboard_map = Path(name)
    dashboard_map.write_text("{}")
    # The mode is read once, in setup: set only while this operator starts, so an operator
    # another test folder starts in this process keeps its own mode.
    previous = os.environ.get("RAYQUOTA_QUEUE_API")
    os.environ["RAYQUOTA_QUEUE_API"] = "kueue"
    try:
        thread, stop = start_operator(dashboard_map, KUEUE_TEST_NAMESPACE_PREFIX)
    finally:
        if previous is None:
            os.environ.pop("RAYQUOTA_QUEUE_API", None)
        else:
            os.environ["RAYQUOTA_QUEUE_API"] = previous
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
        dashboard_map.unlink(missing_ok=True)
        assert not thread.is_alive(), "the operator did not stop within 60s"


@pytest.fixture
def kube(control_plane: Any, namespace: str) -> Kube:
    return Kube(control_plane, namespace)


class KueueQuota:
    """Kueue-shaped quota objects for one test; cluster-scoped ones are named ``<namespace>-<name>``."""

    def __init__(self, control_plane: Any, namespace: str) -> None:
        self.cp = control_plane
        self.ns = namespace
        self.created: list[tuple[str, str]] = []

    def apply(self, kind: str, short: str, spec: dict[str, Any]) -> str:
        name = f"{self.ns}-{short}"
        manifest = {"apiVersion": KUEUE_API, "kind": kind, "metadata": {"name": name}, "spec": spec}
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        self.created.append((kind, name))
        return name

    def flavor(self, short: str, **spec: Any) -> str:
        return self.apply("ResourceFlavor", short, spec)

    def cluster_queue(self, short: str, flavor: str, quota: dict[str, Any], **spec: Any) -> str:
        group = {
            "coveredResources": sorted(quota),
            "flavors": [
                {
                    "name": flavor,
                    "resources": [{"name": r, "nominalQuota": q} for r, q in sorted(quota.items())],
                }
            ],
        }
        return self.apply("ClusterQueue", short, {"resourceGroups": [group], **spec})

    def local_queue(self, name: str, cluster_queue: str) -> None:
        manifest = {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"clusterQueue": cluster_queue},
        }
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))

    def delete_all(self) -> None:
        for kind, name in reversed(self.created):
            self.cp.kubectl("delete", f"{kind.lower()}.kueue.x-k8s.io", name, "--wait=false", check=False)


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
