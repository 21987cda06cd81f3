"""Shared by the RayService integration tests: the manifest, the two Ray heads and the dashboard
map, and small readers of the service's state."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core.event_correlator import SPAM_BURST
from rayquota.operator.ray.vocabulary import labels
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.rayhead import RayHead

NAME = "greeter"
DEMO_APP = "rayquota.devtools.rayservice_demo_app:app"


def serve_config(message: str = "v1", *, fail: bool = False) -> str:
    return (
        "applications:\n  - name: greeter\n    route_prefix: /\n"
        f"    import_path: {DEMO_APP}\n    args:\n      message: {message}\n      fail: {str(fail).lower()}\n"
    )


def manifest(upgrade: dict[str, Any] | None = None, *, delay_s: int = 3) -> dict[str, Any]:
    def container(name: str) -> dict[str, Any]:
        return {"name": name, "image": "rayproject/ray:2.41.0",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}  # fmt: skip

    spec: dict[str, Any] = {
        "serveConfigV2": serve_config(),
        "rayClusterDeletionDelaySeconds": delay_s,
        "rayClusterConfig": {
            "rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {},
                              "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker")]}},
            }],
        },
    }  # fmt: skip
    if upgrade is not None:
        spec["upgradeStrategy"] = upgrade
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": NAME}, "spec": spec}


@pytest.fixture(scope="module")
def second_ray_head() -> Iterator[RayHead]:
    """Head A: the new cluster's dashboard in upgrade tests (the session head is B)."""
    head = RayHead()
    head.start()
    try:
        yield head
    finally:
        head.stop()


class Dashboards:
    """The local resolver's map for this test's namespace."""

    def __init__(self, map_file: Path, namespace: str) -> None:
        self.map_file, self.namespace = map_file, namespace

    def route(self, target: str, url: str) -> None:
        mapping = json.loads(self.map_file.read_text() or "{}")
        mapping[f"{self.namespace}/{target}"] = url
        self.map_file.write_text(json.dumps(mapping))

    def clear(self) -> None:
        mapping = json.loads(self.map_file.read_text() or "{}")
        prefix = f"{self.namespace}/"
        self.map_file.write_text(json.dumps({k: v for k, v in mapping.items() if not k.startswith(prefix)}))


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


@pytest.fixture
def dashboards(dashboard_map_file: Path, namespace: str, ray_head: RayHead) -> Iterator[Dashboards]:
    routes = Dashboards(dashboard_map_file, namespace)
    routes.route("*", ray_head.dashboard_url)
    try:
        yield routes
    finally:
        routes.clear()


def serve_apps(head: RayHead) -> dict[str, Any]:
    with urllib.request.urlopen(f"{head.dashboard_url}/api/serve/applications/", timeout=60) as answer:
        return dict(json.loads(answer.read()))


def deployed_message(head: RayHead) -> str | None:
    app = serve_apps(head).get("applications", {}).get("greeter") or {}
    return ((app.get("deployed_app_config") or {}).get("args") or {}).get("message")


def service(kube: Kube) -> dict[str, Any]:
    obj = kube.get("rayservice", NAME)
    assert obj is not None
    return obj


def cluster_name(obj: dict[str, Any], role: str) -> str | None:
    return ((obj.get("status") or {}).get(f"{role}ServiceStatus") or {}).get("rayClusterName")


def wait_ready(kube: Kube, timeout_s: float = 120) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = service(kube)
        ready = condition(obj, "Ready")
        return obj if ready and ready["status"] == "True" and not cluster_name(obj, "pending") else None

    return wait_for(f"RayService {NAME} Ready", probe, timeout_s=timeout_s)


def clusters(kube: Kube) -> list[str]:
    children = kube.list("rayclusters", f"{labels.ORIGINATED_FROM_CR_NAME}={NAME}")
    return sorted(c["metadata"]["name"] for c in children if not c["metadata"].get("deletionTimestamp"))


def selectors(kube: Kube) -> set[str | None]:
    return {
        (kube.get("service", name) or {}).get("spec", {}).get("selector", {}).get(labels.RAY_CLUSTER)
        for name in (f"{NAME}-head-svc", f"{NAME}-serve-svc")
    }


def reasons(kube: Kube) -> set[str]:
    return {e["reason"] for e in kube.events(NAME)}


def assert_milestone_events(kube: Kube, wanted: set[str]) -> None:
    """The RayService's events name each of ``wanted``, unless its event budget was spent: as
    client-go's recorder does, the operator writes at most SPAM_BURST events about one object in
    a burst (an upgrade's milestones come last), and an event's ``count`` includes the
    occurrences that were not written, so fewer occurrences than the burst mean nothing was
    dropped. An event is written after the change it tells of (the old cluster is gone before
    its DeletedRayCluster event is stored): they are waited for."""

    def all_told(seen: list[dict[str, Any]]) -> bool:
        missing = wanted - {e["reason"] for e in seen}
        return not missing or sum(int(e.get("count") or 1) for e in seen) >= SPAM_BURST

    kube.events_once(NAME, all_told)


def start_upgrade_on_second_head(kube: Kube, dashboards: Dashboards, first: str, head_b: RayHead,
                                 head_a: RayHead, patch: dict[str, Any]) -> None:  # fmt: skip
    dashboards.route(first, head_b.dashboard_url)
    dashboards.route("*", head_a.dashboard_url)
    kube.patch("rayservice", NAME, patch)


def head_image_patch(image: str) -> dict[str, Any]:
    head = manifest()["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    containers = [{**head, "image": image}]
    return {
        "spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": containers}}}}}
    }


NEW_IMAGE = head_image_patch("rayproject/ray:2.42.0")
OLD_IMAGE = head_image_patch("rayproject/ray:2.41.0")
