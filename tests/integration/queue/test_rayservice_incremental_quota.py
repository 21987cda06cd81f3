"""An incremental RayService upgrade under quota: admitted slice by slice, so it needs the active
cluster plus maxSurgePercent, not 200 %; while a slice waits the upgrade stands still and says so.

The test plays the Ray autoscaler (which follows Serve's target capacity in a real cluster): it
sets each cluster's worker replicas, and names the worker to delete on a scale-down.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.queue.conftest import Quota
from tests.integration.queue.test_rayservice_quota import admitted, cpu_queue, dashboards
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NEW_IMAGE,
    Dashboards,
    cluster_name,
    clusters,
    manifest,
    service,
    start_upgrade_on_second_head,
    wait_ready,
)
from tests.integration.ray.test_rayservice_incremental import gateway_class
from tests.polling import holds

pytestmark = [pytest.mark.ray]

second_ray_head = rayservice_support.second_ray_head
__all__ = ["dashboards", "gateway_class"]

# A head of 1000m (Ray 500m + the autoscaler sidecar 500m) and up to 2 workers of 500m:
# the active cluster holds 2000m; the pending one starts at its head (1000m) and grows by a
# worker (500m) per 50 % of capacity.
ACTIVE, PENDING_HEAD, WORKER = 2000, 1000, 500
SURGE, STEP, INTERVAL_S = 50, 25, 10


def incremental_service(class_name: str) -> dict[str, Any]:
    options = {"maxSurgePercent": SURGE, "stepSizePercent": STEP, "intervalSeconds": INTERVAL_S,
               "gatewayClassName": class_name}  # fmt: skip
    body = manifest({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": options}, delay_s=2)
    config = body["spec"]["rayClusterConfig"]
    config["enableInTreeAutoscaling"] = True
    config["workerGroupSpecs"][0].update(replicas=2, minReplicas=0, maxReplicas=2)
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "serve"}
    return body


def autoscale(kube: Kube, cluster: str, replicas: int) -> None:
    """What the Ray autoscaler does: set the replicas, naming the worker to delete on a scale-down."""
    live = kube.get("raycluster", cluster)
    assert live is not None
    groups = live["spec"]["workerGroupSpecs"]
    workers = sorted(p["metadata"]["name"] for p in kube.pods(cluster) if "-worker-" in p["metadata"]["name"])
    groups[0]["replicas"] = replicas
    groups[0]["scaleStrategy"] = {"workersToDelete": workers[replicas:]}
    kube.patch("raycluster", cluster, {"spec": {"workerGroupSpecs": groups}})


def shares(kube: Kube, role: str) -> dict[str, Any]:
    return dict((service(kube).get("status") or {}).get(f"{role}ServiceStatus") or {})


def upgrade_message(kube: Kube) -> str:
    return str((condition(service(kube), "UpgradeInProgress") or {}).get("message"))


def test_incremental_upgrade_needs_only_active_plus_surge(
    queue_operator: Any,
    kube: Kube,
    quota: Quota,
    dashboards: Dashboards,
    gateway_class: str,
    ray_head: RayHead,
    second_ray_head: RayHead,
) -> None:
    cpu_queue(quota, f"{ACTIVE + PENDING_HEAD + WORKER}m")  # active + 50 %, not 200 % (4000m)
    kube.apply(incremental_service(gateway_class))
    first = cluster_name(wait_ready(kube, timeout_s=300), "active")
    assert first is not None and admitted(kube, "cpu") == ACTIVE
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, NEW_IMAGE)

    pending = wait_for("a pending cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=120)
    wait_for("the pending head", lambda: len(kube.pods(pending)) == 1, timeout_s=180)
    assert admitted(kube, "cpu") == ACTIVE + PENDING_HEAD
    wait_for(
        "the pending capacity at the surge",
        lambda: shares(kube, "pending").get("targetCapacity") == SURGE,
        timeout_s=180,
    )
    autoscale(kube, pending, 1)
    wait_for("the pending cluster's first worker", lambda: len(kube.pods(pending)) == 2, timeout_s=120)
    assert admitted(kube, "cpu") == ACTIVE + PENDING_HEAD + WORKER
    wait_for(
        "the active shrunk to 50 % and the pending grown to 100 %",
        lambda: (
            shares(kube, "active").get("targetCapacity") == 50
            and shares(kube, "pending").get("targetCapacity") == 100
        ),
        timeout_s=240,
    )

    # The autoscaler asks for the second worker before the active cluster gave one back: that
    # slice does not fit, and the upgrade stands still while it waits.
    autoscale(kube, pending, 2)
    wait_for(
        "the RayService saying its next slice waits for quota",
        lambda: "the upgrade's next slice waits for quota: scale-up waiting" in upgrade_message(kube),
        timeout_s=60,
    )
    held_traffic = shares(kube, "pending").get("trafficRoutedPercent")
    assert held_traffic is not None and held_traffic < 100
    def standing_still() -> None:
        assert shares(kube, "pending").get("trafficRoutedPercent") == held_traffic
        assert len(kube.pods(pending)) == 2  # the planner cap: no pod beyond the admitted slice
        assert admitted(kube, "cpu") == ACTIVE + PENDING_HEAD + WORKER

    holds("the upgrade standing still", standing_still, seconds=3 * INTERVAL_S)  # three traffic intervals

    autoscale(kube, first, 1)  # the active cluster gives a worker back: the slice fits
    wait_for("the pending cluster's second worker", lambda: len(kube.pods(pending)) == 3, timeout_s=120)
    wait_for(
        "the new cluster promoted", lambda: cluster_name(service(kube), "active") == pending, timeout_s=300
    )
    wait_for("the old cluster deleted", lambda: clusters(kube) == [pending], timeout_s=180)
    wait_for("the Workload shrunk to the new cluster", lambda: admitted(kube, "cpu") == ACTIVE, timeout_s=180)
