"""A RayService upgrade waiting for quota, in the browser: the Workload page shows the old
(active) cluster covered by the admission and the new (pending) one waiting, each with its own
demand, and the new one covered once the quota is raised, on the open page. Real Ray heads run
Serve for the two clusters (the RayService tests' helpers), so the upgrade is a real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.dashboard.support import Served, chromium, screenshot
from tests.integration.dashboard.test_browser_pages import readme_copy
from tests.integration.queue.conftest import Quota, workload_of
from tests.integration.queue.test_rayservice_quota import admitted, cpu_queue, upgrade_waits_for_quota
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NAME,
    NEW_IMAGE,
    Dashboards,
    cluster_name,
    manifest,
    service,
)

pytestmark = [pytest.mark.ray]

second_ray_head = rayservice_support.second_ray_head


@pytest.fixture
def routes(dashboard_operator: Path, namespace: str, ray_head: RayHead) -> Iterator[Dashboards]:
    routes = Dashboards(dashboard_operator, namespace)
    routes.route("*", ray_head.dashboard_url)
    try:
        yield routes
    finally:
        routes.clear()


def test_upgrade_waiting_for_quota_shows_both_clusters(
    dashboard: Served,
    routes: Dashboards,
    quota: Quota,
    control_plane: Any,
    namespace: str,
    admin_token: str,
    ray_head: RayHead,
    second_ray_head: RayHead,
    tmp_path: Path,
) -> None:
    kube = Kube(control_plane, namespace)
    cpu_queue(quota, "1500m")  # one cluster (1 CPU), not two
    checked: list[str] = []

    with chromium() as browser:
        page = browser.new_page()

        def look_then_raise_quota() -> None:
            svc = service(kube)
            active, pending = cluster_name(svc, "active"), cluster_name(svc, "pending")
            wl = workload_of(kube, "RayService", NAME)
            assert wl is not None and active and pending
            page.goto(f"{dashboard.url}/workloads/{namespace}/{wl['metadata']['name']}#token={admin_token}")
            old = page.locator(f'section.slice[data-part="{active}"]')
            new = page.locator(f'section.slice[data-part="{pending}"]')
            old.wait_for(timeout=10_000)
            new.wait_for(timeout=10_000)
            assert "active" in old.inner_text() and "covered by the admission" in old.inner_text()
            assert "pending" in new.inner_text() and "waiting for quota" in new.inner_text()
            for cluster in (old, new):  # each cluster's own demand: head + one worker of 500m
                assert "needs cpu 1, memory 2Gi" in cluster.inner_text()
            assert page.inner_text("#pending-reason").startswith("scale-up waiting: ")
            readme_copy(screenshot(page, tmp_path, "rayservice-upgrade-waiting"), "dashboard-upgrade.png")
            page.evaluate("window.loadedOnce = true")

            cpu_queue(quota, "3")
            page.locator(f'section.slice.covered[data-part="{pending}"]').wait_for(timeout=60_000)
            assert page.evaluate("window.loadedOnce") is True  # updated live, not reloaded
            screenshot(page, tmp_path, "rayservice-upgrade-covered")
            checked.append(pending)

        upgrade_waits_for_quota(
            kube,
            routes,
            (ray_head, second_ray_head),
            manifest(delay_s=3),
            NEW_IMAGE,
            raise_quota=look_then_raise_quota,
            usage=lambda: admitted(kube, "cpu"),
            usage_old_new=(1000, 1000),
        )
    assert checked, "the upgrade never waited for quota"
