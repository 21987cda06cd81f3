"""Every page in a real headless Chromium, against the local control plane with the operator
running: a RayJob beyond quota appears in the queue order with the engine's sentence within
2 s, and raising the quota admits it while the page watches. A screenshot of each page is saved
under the test's output directory (and, with RAYQUOTA_SCREENSHOTS_DIR set, the README's two)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.dashboard.support import Served, chromium, screenshot
from tests.integration.queue.conftest import Quota, admitted_workload, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube

pytestmark = pytest.mark.usefixtures("dashboard_operator")
LIVE_DEADLINE_S = 2.0


def readme_copy(shot: Path, name: str) -> None:
    target = os.environ.get("RAYQUOTA_SCREENSHOTS_DIR")
    if target:
        shutil.copyfile(shot, Path(target) / name)


def test_each_page_live_queue_order_and_admission(
    dashboard: Served, quota: Quota, control_plane: Any, namespace: str, admin_token: str, tmp_path: Path
) -> None:
    kube = Kube(control_plane, namespace)
    cq = quota.a100_team_queue(8)
    kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
    admitted_workload(kube, "RayJob", "first")

    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))

        # Cohorts and ClusterQueues: the bar says its numbers in words.
        page.goto(f"{dashboard.url}/cohorts?name={cq}#token={admin_token}")
        card = page.locator(f'section[data-cluster-queue="{cq}"]')
        card.wait_for(timeout=10_000)
        page.locator(
            f'section[data-cluster-queue="{cq}"] svg[aria-label^="nvidia.com/gpu: 8 of 8 used"]'
        ).wait_for(timeout=10_000)
        assert "admitted 1" in card.inner_text()
        assert "#token=" not in page.url, "the token stays in the address bar"
        readme_copy(screenshot(page, tmp_path, "cohorts"), "dashboard-cohorts.png")

        # Keyboard: the skip link comes first, then the pages.
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Cohorts & queues"
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Queue order"

        # Queue order: a RayJob beyond quota appears with the engine's sentence within 2 s.
        page.goto(f"{dashboard.url}/queues/{cq}")
        page.locator("#queue-order").wait_for(timeout=10_000)
        page.evaluate("window.loadedOnce = true")
        kube.apply(gpu_rayjob("second", "team", workers=2, gpus_per_worker=4))
        applied = time.monotonic()
        row = page.locator(f'#queue-order tr[data-workload^="{namespace}/rayjob-second-"]')
        row.wait_for(timeout=LIVE_DEADLINE_S * 1000)
        page.wait_for_function(
            "(el) => el.textContent.includes('ClusterQueue') && el.textContent.includes('0 of 8 free')",
            arg=row.element_handle(),
            timeout=max(1.0, LIVE_DEADLINE_S - (time.monotonic() - applied)) * 1000,
            polling=50,
        )
        shown_after_s = time.monotonic() - applied
        assert shown_after_s < LIVE_DEADLINE_S, f"shown after {shown_after_s:.2f}s"
        text = row.inner_text()
        assert "needs 8 nvidia.com/gpu in flavor" in text and "RayJob/second" in text
        assert text.split("\t")[0].strip() == "1"  # first in line
        readme_copy(screenshot(page, tmp_path, "queue-order"), "dashboard-queue-order.png")

        # The workload: pending with its sentence; raising the quota admits it on the open page.
        row.locator("a").click()
        page.locator("#workload-phase").wait_for(timeout=10_000)
        assert page.inner_text("#workload-phase") == "Pending"
        assert "0 of 8 free" in page.inner_text("#pending-reason")
        assert page.evaluate("window.loadedOnce") is True  # client-side navigation, no reload
        screenshot(page, tmp_path, "workload-pending")
        quota.cluster_queue("team", {quota.name("a100"): 16})
        page.wait_for_function(
            "() => document.getElementById('workload-phase')?.textContent === 'Admitted'",
            timeout=30_000,
            polling=100,
        )
        assert page.evaluate("window.loadedOnce") is True
        wl = workload_of(kube, "RayJob", "second")
        assert wl is not None and wl["status"]["admission"]["clusterQueue"] == cq
        page.locator("table:has(caption:text('Pods')) td:text-matches('a100|gpu')").first.wait_for(
            timeout=30_000
        )
        screenshot(page, tmp_path, "workload-admitted")

        # Ray objects: both RayJobs, each linked to its Workload.
        page.goto(f"{dashboard.url}/ray?kind=RayJob")
        for name in ("first", "second"):
            page.locator(f'#ray-objects tr[data-object="RayJob/{namespace}/{name}"] a').wait_for(
                timeout=10_000
            )
        screenshot(page, tmp_path, "ray-objects")

        # History: two charts, described in words for screen readers.
        page.goto(f"{dashboard.url}/history")
        page.locator(f'figure.chart svg[aria-label*="{cq} now 16"]').wait_for(timeout=10_000)
        assert page.locator(f'figure.chart svg[aria-label*="{cq} now"]').count() == 2
        screenshot(page, tmp_path, "history")
        assert errors == []
    for name in ("cohorts", "queue-order", "workload-pending", "workload-admitted", "ray-objects", "history"):
        assert (tmp_path / f"{name}.png").is_file()
