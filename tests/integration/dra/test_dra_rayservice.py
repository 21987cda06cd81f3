"""A RayService upgrade whose clusters ask for GPUs through ResourceClaimTemplates: 1 device per
worker in the old cluster, 2 in the new, under a quota of 2 devices. The pending cluster waits,
gated; more quota releases it, charged beside the active one; the Workload shrinks back once the
old pods are gone. The sampler counts the allocated devices of live pods throughout.

Real Ray heads running Serve stand in for the clusters' dashboards (the RayService tests'
helpers), so the service really becomes Ready and really upgrades."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.dra.conftest import GPU_RESOURCE, claim_template, device_queue, group_with_claims
from tests.integration.queue.conftest import Quota
from tests.integration.queue.test_rayservice_quota import admitted, upgrade_waits_for_quota
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import Dashboards, manifest

pytestmark = [pytest.mark.ray]

second_ray_head = rayservice_support.second_ray_head


@pytest.fixture
def dashboards(dra_operator: Path, namespace: str, ray_head: RayHead) -> Iterator[Dashboards]:
    routes = Dashboards(dra_operator, namespace)
    routes.route("*", ray_head.dashboard_url)
    try:
        yield routes
    finally:
        routes.clear()


def claim_workers(template: str) -> list[dict[str, Any]]:
    groups = manifest()["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    return [group_with_claims(group, template) for group in groups]


def test_an_upgrade_to_dra_workers_is_charged_active_plus_pending(
    kube: Kube,
    quota: Quota,
    dashboards: Dashboards,
    dra_sampler: Any,
    ray_head: RayHead,
    second_ray_head: RayHead,
) -> None:
    a100 = quota.flavor("a100", "a100")

    def queue(devices: int) -> str:
        return device_queue(quota, "serve", {a100: {GPU_RESOURCE: devices}})

    sampler = dra_sampler(queue(2))  # either cluster alone (1 or 2 devices), not both (3)
    kube.apply(claim_template("one-gpu", 1))
    kube.apply(claim_template("two-gpus", 2))
    old = manifest(delay_s=3)
    old["spec"]["rayClusterConfig"]["workerGroupSpecs"] = claim_workers("one-gpu")
    upgrade_waits_for_quota(
        kube,
        dashboards,
        (ray_head, second_ray_head),
        old,
        {"spec": {"rayClusterConfig": {"workerGroupSpecs": claim_workers("two-gpus")}}},
        raise_quota=lambda: queue(3),
        usage=lambda: admitted(kube, GPU_RESOURCE),
        usage_old_new=(1000, 2000),
    )
    sampler.assert_holds()
