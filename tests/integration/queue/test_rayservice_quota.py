"""A RayService upgrade under quota: the pending cluster waits, gated, while the active one
keeps serving; more quota releases it; once the old cluster is gone the Workload shrinks.
Once with identical pod shapes (CPU), once with workers of 1 GPU replaced by workers of 2.

Real Ray heads running Serve stand in for the clusters' dashboards (the RayService tests'
helpers), so the service really becomes Ready and really upgrades.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota import cli_views
from rayquota.queueing import parse_quantity
from tests.integration.queue.conftest import Quota, is_admitted, workload_of
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
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
from tests.polling import holds

pytestmark = [pytest.mark.ray]

# Fixtures shared with the RayService tests, made visible here.
second_ray_head = rayservice_support.second_ray_head


@pytest.fixture
def dashboards(queue_operator: Path, namespace: str, ray_head: RayHead) -> Iterator[Dashboards]:
    routes = Dashboards(queue_operator, namespace)
    routes.route("*", ray_head.dashboard_url)
    try:
        yield routes
    finally:
        routes.clear()


def cpu_queue(quota: Quota, cpu: str) -> None:
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
    quota.local_queue("serve", quota.apply("ClusterQueue", "serve", {"spec": {"resourceGroups": groups}}))


def gpu_queue(quota: Quota, gpus: int) -> None:
    """A100 GPUs (CPU and memory plentiful)."""
    quota.local_queue("serve", quota.cluster_queue("serve", {quota.flavor("a100", "a100"): gpus}))


def workload_status(kube: Kube) -> dict[str, Any]:
    return dict((workload_of(kube, "RayService", NAME) or {}).get("status") or {})


def admitted(kube: Kube, resource: str) -> int | None:
    """The RayService's admitted usage of ``resource``, in milli-units (None: not admitted)."""
    wl = workload_of(kube, "RayService", NAME)
    if wl is None or not is_admitted(wl):
        return None
    return sum(
        parse_quantity(str(ps.get("resourceUsage", {}).get(resource, "0")))
        for ps in wl["status"]["admission"]["podSetAssignments"]
    )


def with_gpu_workers(spec: dict[str, Any], gpus: int) -> list[dict[str, Any]]:
    """The worker groups of ``spec`` with ``gpus`` GPUs per worker (requests = limits)."""
    groups = spec["rayClusterConfig"]["workerGroupSpecs"]
    for group in groups:
        for container in group["template"]["spec"]["containers"]:
            resources = container["resources"]
            resources["requests"]["nvidia.com/gpu"] = str(gpus)
            resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return list(groups)


def fetched_state() -> Any:
    """What `rayquota explain` reads, fetched on a loop of its own thread: the dashboard's browser
    test runs this scenario inside Playwright's sync API, whose loop runs on the calling thread."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, cli_views.fetch_state()).result(timeout=60)


def upgrade_waits_for_quota(
    kube: Kube,
    dashboards: Dashboards,
    heads: tuple[RayHead, RayHead],
    service_manifest: dict[str, Any],
    upgrade: dict[str, Any],
    raise_quota: Callable[[], None],
    usage: Callable[[], int | None],
    usage_old_new: tuple[int, int],
) -> None:
    """The scenario both tests run; ``usage_old_new``: what each cluster alone is admitted."""
    old_usage, new_usage = usage_old_new
    service_manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "serve"}
    kube.apply(service_manifest)
    first = cluster_name(wait_ready(kube, timeout_s=300), "active")
    assert first is not None and usage() == old_usage
    start_upgrade_on_second_head(kube, dashboards, first, *heads, upgrade)

    pending = wait_for("a pending cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=120)
    wait_for(
        "the upgrade's slice waiting for quota",
        lambda: (
            "scale-up waiting"
            in str((workload_of(kube, "RayService", NAME) or {}).get("status", {}).get("pendingReason"))
        ),
        timeout_s=120,
    )
    # The RayService says so: its upgrade waits for quota, and the queue's sentence is on it.
    wait_for(
        "the RayService saying its upgrade waits for quota",
        lambda: (
            f"RayCluster {pending} waits for quota: scale-up waiting"
            in str((condition(service(kube), "UpgradeInProgress") or {}).get("message"))
        ),
        timeout_s=60,
    )
    quota_condition = condition(service(kube), "QuotaReserved") or {}
    assert quota_condition.get("status") == "True" and quota_condition.get("reason") == "Admitted"
    assert str(quota_condition.get("message")).startswith("scale-up waiting: ")
    # The waiting pod sets are named as the user knows them: the new cluster's worker group.
    reason = str(workload_status(kube).get("pendingReason"))
    assert f"`{pending}`" in reason and "worker group `" in reason and "pod set " not in reason, reason
    # `rayquota explain` says why the admitted service's upgrade waits.
    explained = cli_views.explain(fetched_state(), "rayservice", NAME, kube.ns)
    assert "Admitted" in explained.splitlines()[0], explained
    said = ("(an upgrade) and waits: ", "(an upgrade or a scale-up) and waits: ")
    assert any(words in explained for words in said) and f"`{pending}`" in explained, explained
    cluster_queue = workload_status(kube)["admission"]["clusterQueue"]
    # For a while: the pending cluster stays gated with no pods; the active one keeps its pods.
    def still_waiting() -> None:
        child = kube.get("raycluster", pending)
        assert child is not None and child["spec"]["suspend"] is True
        assert kube.pods(pending) == []
        assert len(kube.pods(first)) == 2
        assert usage() == old_usage
        said = str((condition(service(kube), "UpgradeInProgress") or {}).get("message"))
        assert "waits for quota: The workload is admitted" not in said, said
        # `rayquota queues` reads these: one Workload, admitted, not pending as well.
        counts = queue_counts()
        assert counts == (1, 0), counts

    def queue_counts() -> tuple[Any, Any]:
        status = (kube.get("clusterqueue.rayquota.io", cluster_queue) or {}).get("status") or {}
        return status.get("admittedWorkloads"), status.get("pendingWorkloads")

    # The queue's status is written by a pass every STATUS_PERIOD_S: a scenario quicker than
    # that meets the counts of the queue's first write (nothing admitted yet); once written,
    # they must hold for the whole window.
    wait_for("the ClusterQueue counting the admitted Workload", lambda: queue_counts() == (1, 0))
    holds("the pending cluster gated, the active one running", still_waiting, seconds=10)

    raise_quota()
    wait_for("the pending cluster's pods", lambda: len(kube.pods(pending)) == 2, timeout_s=180)
    assert usage() == old_usage + new_usage  # both clusters, each counted with its own shape
    wait_for(
        "the new cluster promoted", lambda: cluster_name(service(kube), "active") == pending, timeout_s=300
    )
    wait_for("the old cluster deleted", lambda: clusters(kube) == [pending], timeout_s=180)
    # A scale-down slice: back to the new cluster's worth once the old pods are gone.
    wait_for("the Workload shrunk back", lambda: usage() == new_usage, timeout_s=180)
    wait_for(
        "the RayService's QuotaReserved condition without a waiting slice",
        lambda: str((condition(service(kube), "QuotaReserved") or {}).get("message")).startswith(
            "The workload is admitted to "
        ),
        timeout_s=60,
    )


@pytest.fixture
def upgrade_under_quota(
    queue_operator: Path, kube: Kube, dashboards: Dashboards, ray_head: RayHead, second_ray_head: RayHead
) -> Callable[..., None]:
    """The scenario, bound to this test's cluster and the two Ray heads."""
    return functools.partial(upgrade_waits_for_quota, kube, dashboards, (ray_head, second_ray_head))


def test_upgrade_waits_gated_for_quota_then_shrinks_back(
    upgrade_under_quota: Callable[..., None], kube: Kube, quota: Quota
) -> None:
    cpu_queue(quota, "1500m")  # one cluster (1 CPU), not two
    upgrade_under_quota(
        manifest(delay_s=3),
        NEW_IMAGE,
        raise_quota=lambda: cpu_queue(quota, "3"),
        usage=lambda: admitted(kube, "cpu"),
        usage_old_new=(1000, 1000),
    )


def test_upgrade_to_workers_of_another_shape_is_counted_per_shape(
    upgrade_under_quota: Callable[..., None], kube: Kube, quota: Quota
) -> None:
    """1 GPU per worker in the old cluster, 2 in the new: same group name, different shapes."""
    gpu_queue(quota, 2)  # either cluster alone (1 or 2 GPUs), not both (3)
    old = manifest(delay_s=3)
    with_gpu_workers(old["spec"], 1)
    new_groups = with_gpu_workers(manifest()["spec"], 2)
    upgrade_under_quota(
        old,
        {"spec": {"rayClusterConfig": {"workerGroupSpecs": new_groups}}},
        raise_quota=lambda: gpu_queue(quota, 3),
        usage=lambda: admitted(kube, "nvidia.com/gpu"),
        usage_old_new=(1000, 2000),
    )
