"""NewClusterWithIncrementalUpgrade on the local control plane, with two real Ray heads running
Serve: every step is watched (status, HTTPRoute weights, each head's Serve target_capacity) and
checked against what the options allow; a revert mid-upgrade walks back; a missing
GatewayClass is reported, not crashed on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import pairwise
from typing import Any

import pytest

from rayquota.operator.ray.rayservice import gateway
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NAME,
    NEW_IMAGE,
    OLD_IMAGE,
    Dashboards,
    assert_milestone_events,
    cluster_name,
    clusters,
    manifest,
    serve_apps,
    service,
    start_upgrade_on_second_head,
    wait_ready,
)

pytestmark = pytest.mark.ray

# The shared fixtures, made visible to pytest in this module.
kube = rayservice_support.kube
dashboards = rayservice_support.dashboards
second_ray_head = rayservice_support.second_ray_head

SURGE, STEP, INTERVAL_S = 50, 25, 2
# (active capacity, pending capacity, pending traffic) in the order the options allow.
UPGRADE_PATH = [(100, 0, 0), (100, 50, 0), (100, 50, 25), (100, 50, 50), (50, 50, 50), (50, 100, 50),
                (50, 100, 75), (50, 100, 100), (0, 100, 100)]  # fmt: skip


@pytest.fixture
def gateway_class(control_plane: Any, namespace: str) -> Iterator[str]:
    """A GatewayClass (cluster-scoped, so named after the test's namespace). No gateway controller
    runs locally: the operator writes the weights, nothing routes by them."""
    name = f"rq-{namespace}"[:63]
    body = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": name},
            "spec": {"controllerName": "rayquota.io/test-gateway-controller"}}  # fmt: skip
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "gatewayclass", name, "--wait=false", check=False)


def incremental(class_name: str) -> dict[str, Any]:
    options = {"maxSurgePercent": SURGE, "stepSizePercent": STEP, "intervalSeconds": INTERVAL_S,
               "gatewayClassName": class_name}  # fmt: skip
    body = manifest({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": options}, delay_s=2)
    # KubeRay's rule: the new cluster grows through the Ray autoscaler.
    body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return body


def serve_capacity(head: RayHead) -> int:
    capacity = serve_apps(head).get("target_capacity")
    return 100 if capacity is None else round(capacity)


class Snapshot:
    """Route weights, then the status, then each head's Serve capacity (in that order, so each
    later reading can only be further along than the earlier one)."""

    def __init__(self, kube: Kube, active_head: RayHead, pending_head: RayHead) -> None:
        route = kube.get("httproute", gateway.httproute_name(NAME)) or {}
        self.weights = {b.service: b.weight for b in gateway.route_backends(route)}
        self.status = service(kube)["status"]
        self.active = self.status.get("activeServiceStatus") or {}
        self.pending = self.status.get("pendingServiceStatus") or {}
        self.active_head_capacity = serve_capacity(active_head)
        self.pending_head_capacity = serve_capacity(pending_head)

    def shares(self) -> tuple[int, int, int] | None:
        if "targetCapacity" not in self.pending:
            return None
        return (
            self.active["targetCapacity"],
            self.pending["targetCapacity"],
            self.pending["trafficRoutedPercent"],
        )


def check_snapshot(snap: Snapshot, *, upgrading: bool) -> None:
    active, pending = snap.active, snap.pending
    if "targetCapacity" not in pending:
        return
    assert active["trafficRoutedPercent"] + pending["trafficRoutedPercent"] == 100
    assert active["trafficRoutedPercent"] <= active["targetCapacity"]
    assert pending["trafficRoutedPercent"] <= pending["targetCapacity"]
    assert active["targetCapacity"] + pending["targetCapacity"] <= 100 + SURGE
    pending_backend = f"{pending['rayClusterName']}-serve-svc"
    if pending_backend in snap.weights:
        assert sum(snap.weights.values()) == 100
        if upgrading:  # read before the status: the capacity can only have grown since
            assert snap.weights[pending_backend] <= pending["targetCapacity"]
            assert snap.pending_head_capacity >= pending["targetCapacity"]
            assert snap.active_head_capacity <= active["targetCapacity"]


def is_subsequence(seen: list[tuple[int, int, int]], path: list[tuple[int, int, int]]) -> bool:
    remaining = iter(path)
    return all(step in remaining for step in seen)


def watch(kube: Kube, heads: tuple[RayHead, RayHead], done: Callable[[Snapshot], bool], *,
          upgrading: bool, timeout_s: float) -> list[Snapshot]:  # fmt: skip
    """Snapshot (and check) until ``done``; every snapshot is returned for the path checks."""
    snaps: list[Snapshot] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snaps.append(Snapshot(kube, *heads))
        check_snapshot(snaps[-1], upgrading=upgrading)
        if done(snaps[-1]):
            return snaps
    raise AssertionError(f"not done after {timeout_s}s; last status {snaps[-1].status if snaps else None}")


def serving(kube: Kube, body: dict[str, Any]) -> str:
    """Apply the service, wait until it is Ready; the name of its first cluster."""
    kube.apply(body)
    first = cluster_name(wait_ready(kube), "active")
    assert first is not None
    return first


def migration_times(snaps: list[Snapshot], role: str) -> list[datetime]:
    stamps = sorted({getattr(s, role).get("lastTrafficMigratedTime") for s in snaps} - {None})
    return [datetime.fromisoformat(str(t).replace("Z", "+00:00")) for t in stamps]


def test_incremental_upgrade_walks_its_steps(
    kube: Kube, dashboards: Dashboards, gateway_class: str, ray_head: RayHead, second_ray_head: RayHead
) -> None:
    first = serving(kube, incremental(gateway_class))
    route = kube.get("httproute", gateway.httproute_name(NAME))
    assert route is not None and gateway.route_backends(route) == [
        gateway.Backend(f"{first}-serve-svc", 8000, 100)
    ]
    assert kube.get("gateway", gateway.gateway_name(NAME))["spec"]["gatewayClassName"] == gateway_class  # type: ignore[index]
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, NEW_IMAGE)

    heads = (ray_head, second_ray_head)
    snaps = watch(kube, heads, lambda s: s.active.get("rayClusterName") not in (None, first),
                  upgrading=True, timeout_s=240)  # fmt: skip
    seen = list(dict.fromkeys(s for s in (snap.shares() for snap in snaps) if s is not None))
    assert is_subsequence(seen, UPGRADE_PATH), seen
    assert len(seen) >= 4, f"too few steps observed to mean anything: {seen}"
    moves = migration_times(snaps, "pending")
    assert all((b - a).total_seconds() >= INTERVAL_S - 1 for a, b in pairwise(moves))
    new = snaps[-1].active["rayClusterName"]
    alone = [gateway.Backend(f"{new}-serve-svc", 8000, 100)]
    wait_for(
        "the route on the new cluster alone",
        lambda: gateway.route_backends(kube.get("httproute", gateway.httproute_name(NAME)) or {}) == alone,
    )
    wait_for("the old cluster deleted", lambda: clusters(kube) == [new], timeout_s=60)
    assert_milestone_events(kube, {"TargetCapacityChanged", "TrafficMigrated", "PromotedRayCluster"})


def test_a_revert_mid_upgrade_rolls_back(
    kube: Kube, dashboards: Dashboards, gateway_class: str, ray_head: RayHead, second_ray_head: RayHead
) -> None:
    first = serving(kube, incremental(gateway_class))
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, NEW_IMAGE)

    def halfway() -> Snapshot | None:
        snap = Snapshot(kube, ray_head, second_ray_head)
        return snap if snap.pending.get("trafficRoutedPercent", 0) >= 50 else None

    pending = wait_for("half the traffic on the new cluster", halfway, timeout_s=120).pending[
        "rayClusterName"
    ]
    kube.patch("rayservice", NAME, OLD_IMAGE)

    def rolling_back() -> bool:
        return (condition(service(kube), "RollbackInProgress") or {}).get("status") == "True"

    wait_for("RollbackInProgress", rolling_back, timeout_s=30)

    snaps = watch(kube, (ray_head, second_ray_head), lambda s: not s.pending, upgrading=False, timeout_s=180)
    traffic_back = [s.active["trafficRoutedPercent"] for s in snaps if "trafficRoutedPercent" in s.active]
    assert traffic_back == sorted(traffic_back), "traffic only walks back to the active cluster"
    assert all((t - traffic_back[0]) % STEP == 0 for t in traffic_back), traffic_back
    moves = migration_times(snaps, "active")
    assert all((b - a).total_seconds() >= INTERVAL_S - 1 for a, b in pairwise(moves))
    final = service(kube)
    assert cluster_name(final, "active") == first
    assert final["status"]["activeServiceStatus"]["trafficRoutedPercent"] == 100
    assert (condition(final, "RollbackInProgress") or {}).get("status") == "False"
    wait_for("the new cluster deleted", lambda: pending not in clusters(kube), timeout_s=30)
    kube.reasons_once(NAME, {"RollbackStarted"})


def test_a_missing_gateway_class_is_reported(kube: Kube, dashboards: Dashboards) -> None:
    first = serving(kube, incremental("no-such-class"))
    kube.patch("rayservice", NAME, NEW_IMAGE)

    def reported() -> dict[str, Any] | None:
        upgrade = condition(service(kube), "UpgradeInProgress") or {}
        return upgrade if upgrade.get("reason") == "GatewayClassNotFound" else None

    upgrade = wait_for("UpgradeInProgress=False GatewayClassNotFound", reported, timeout_s=30)
    assert "no-such-class" in upgrade["message"]
    kube.reasons_once(NAME, {"GatewayClassNotFound"})
    assert clusters(kube) == [first]
    assert (condition(service(kube), "Ready") or {}).get("status") == "True"
