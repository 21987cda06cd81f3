"""A RayService upgrade under quota: the pending cluster waits, gated, while the active one
keeps serving; more quota releases it; once the old cluster is gone the Workload shrinks.

Real Ray heads running Serve stand in for the clusters' dashboards (the RayService tests'
helpers), so the service really becomes Ready and really upgrades.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import Quota, is_admitted, workload_of
from tests.integration.ray import rayservice_support
from tests.integration.ray.conftest import ray_head
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NAME,
    NEW_IMAGE,
    Dashboards,
    cluster_name,
    clusters,
    manifest,
    service,
    start_upgrade_on_second_head,
    wait_ready,
)

pytestmark = [pytest.mark.ray]

# Fixtures shared with the RayService tests, made visible here.
second_ray_head = rayservice_support.second_ray_head
__all__ = ["ray_head"]


@pytest.fixture
def dashboards(queue_operator: Path, namespace: str, ray_head: RayHead) -> Iterator[Dashboards]:
    routes = Dashboards(queue_operator, namespace)
    routes.route("*", ray_head.dashboard_url)
    try:
        yield routes
    finally:
        routes.clear()


def cpu_queue(quota: Quota, kube: Kube, cpu: str) -> str:
    """CPU-only quota: a cluster of the manifest is a head and a worker of 500m CPU each."""
    flavor = quota.apply("ResourceFlavor", "cpu", {"spec": {"nodeLabels": {"rayquota.io/node-pool": "cpu"}}})
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "nominalQuota": cpu},
                        {"name": "memory", "nominalQuota": "16Gi"},
                    ],
                }
            ],
        }
    ]
    cq = quota.apply("ClusterQueue", "serve", {"spec": {"resourceGroups": groups}})
    quota.local_queue("serve", cq)
    return cq


def admitted_cpu(kube: Kube) -> str | None:
    wl = workload_of(kube, "RayService", NAME)
    if wl is None or not is_admitted(wl):
        return None
    total = 0
    for ps in wl["status"]["admission"]["podSetAssignments"]:
        cpu = ps["resourceUsage"].get("cpu", "0")
        total += int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000
    return f"{total}m"


def test_upgrade_waits_gated_for_quota_then_shrinks_back(
    queue_operator: Path,
    kube: Kube,
    quota: Quota,
    dashboards: Dashboards,
    ray_head: RayHead,
    second_ray_head: RayHead,
) -> None:
    cpu_queue(quota, kube, "1500m")  # one cluster (1 CPU), not two
    service_manifest: dict[str, Any] = manifest(delay_s=3)
    service_manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "serve"}
    kube.apply(service_manifest)
    first = cluster_name(wait_ready(kube, timeout_s=240), "active")
    assert first is not None and admitted_cpu(kube) == "1000m"
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, NEW_IMAGE)

    pending = wait_for("a pending cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=60)
    wait_for(
        "the upgrade's slice waiting for quota",
        lambda: (
            "scale-up waiting"
            in str((workload_of(kube, "RayService", NAME) or {}).get("status", {}).get("pendingReason"))
        ),
        timeout_s=60,
    )
    # For a while: the pending cluster stays gated with no pods; the active one keeps its pods.
    until = time.monotonic() + 10
    while time.monotonic() < until:
        child = kube.get("raycluster", pending)
        assert child is not None and child["spec"]["suspend"] is True
        assert kube.pods(pending) == []
        assert len(kube.pods(first)) == 2
        time.sleep(0.5)
    assert admitted_cpu(kube) == "1000m"

    cpu_queue(quota, kube, "3")  # raising the quota releases it
    wait_for("the pending cluster's pods", lambda: len(kube.pods(pending)) == 2, timeout_s=120)
    wait_for(
        "the new cluster promoted", lambda: cluster_name(service(kube), "active") == pending, timeout_s=180
    )
    wait_for("the old cluster deleted", lambda: clusters(kube) == [pending], timeout_s=120)
    # A scale-down slice: back to one cluster's worth once the old pods are gone.
    wait_for("the Workload shrunk back", lambda: admitted_cpu(kube) == "1000m", timeout_s=120)
