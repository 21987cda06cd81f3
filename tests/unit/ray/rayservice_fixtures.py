"""RayService bodies and their children for unit tests (camelCase dicts, as the API server sends)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from rayquota.operator.ray.rayservice.cluster import build_cluster
from tests.unit.ray.fixtures import BASE_CLUSTER

OPERATOR_VERSION = "test-1"


def service(
    edit: Callable[[dict[str, Any]], None] | None = None, *, upgrade: str | None = None
) -> dict[str, Any]:
    """A RayService whose rayClusterConfig is the unit tests' base cluster, edited by ``edit``."""
    config = copy.deepcopy(BASE_CLUSTER["spec"])
    if edit is not None:
        edit(config)
    spec: dict[str, Any] = {"serveConfigV2": "applications: []\n", "rayClusterConfig": config}
    if upgrade is not None:
        spec["upgradeStrategy"] = {"type": upgrade}
        if upgrade == "NewClusterWithIncrementalUpgrade":
            spec["upgradeStrategy"]["clusterUpgradeOptions"] = {
                "maxSurgePercent": 50, "stepSizePercent": 25, "intervalSeconds": 10,
                "gatewayClassName": "local",
            }  # fmt: skip
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {
            "name": "svc", "namespace": "team-a", "uid": "svc-uid", "generation": 1,
            "labels": {"rayquota.io/queue-name": "team-a"},
        },
        "spec": spec,
    }  # fmt: skip


def child_of(svc: dict[str, Any], name: str = "svc-abcde", **kwargs: Any) -> dict[str, Any]:
    """The child this service would create, as the API server would return it."""
    body = build_cluster(svc, name, OPERATOR_VERSION, autoscale_from_min=False, **kwargs)
    body["metadata"]["uid"] = f"uid-{name}"
    return body
