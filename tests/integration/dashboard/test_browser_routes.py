"""Every page of the dashboard opened by its address (a bookmark, a new tab, a shared link) and
reloaded, in a real headless Chromium: the server answers each client-side route with the app
and the app renders it. And what the pages say about a queue that cannot admit anything, a job
that can never fit, and the names the operator quotes in its sentences."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.dashboard.support import Served, chromium
from tests.integration.queue.conftest import Quota, admitted_workload, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for

pytestmark = pytest.mark.usefixtures("dashboard_operator")

RENDERED = (
    "() => { const main = document.getElementById('main');"
    " return main.dataset.rendered && !main.textContent.includes('No page at'); }"
)


def open_and_reload(page: Any, url: str) -> None:
    """The address opened as a deep link, then reloaded: both answered with the app, rendered."""
    for load in (lambda: page.goto(url), page.reload):
        response = load()
        assert response is not None and response.status == 200, f"{url}: {response and response.status}"
        page.wait_for_function(RENDERED, timeout=15_000, polling=100)


def test_every_route_opens_by_its_address_and_on_reload(
    dashboard: Served, quota: Quota, control_plane: Any, namespace: str, admin_token: str
) -> None:
    kube = Kube(control_plane, namespace)
    cq = quota.a100_team_queue(8)
    kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
    admitted_workload(kube, "RayJob", "first")
    kube.apply(gpu_rayjob("second", "team", workers=2, gpus_per_worker=4))  # waits its turn
    kube.apply(gpu_rayjob("huge", "team", workers=4, gpus_per_worker=4))  # 16 of 8: never fits
    second = wait_for("the second Workload", lambda: workload_of(kube, "RayJob", "second"), timeout_s=60)
    wait_for("the third Workload", lambda: workload_of(kube, "RayJob", "huge"), timeout_s=60)
    broken = quota.cluster_queue("broken", {quota.name("no-such-flavor"): 4})
    pages = [
        "/cohorts",
        "/queues",
        f"/queues/{cq}",
        "/localqueues",
        f"/localqueues/{namespace}/team",
        "/workloads",
        f"/workloads/{namespace}/{second['metadata']['name']}",
        "/ray",
        "/history",
        "/usage",
    ]
    # Every page by its address with and without a trailing slash (and with a query).
    routes = [
        "/",
        *pages,
        *(f"{page}/" for page in pages),
        "/usage?by=namespace&since=7d",
        "/usage/?by=namespace",
    ]
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{dashboard.url}/cohorts#token={admin_token}")  # signed in for this tab
        page.wait_for_function(RENDERED, timeout=15_000, polling=100)
        for route in routes:
            open_and_reload(page, f"{dashboard.url}{route}")

        # The names the operator quotes (`gpu`) are shown as code, never as raw backticks.
        page.goto(f"{dashboard.url}/workloads/{namespace}/{second['metadata']['name']}")
        reason = page.locator("#pending-reason")
        reason.locator("code").first.wait_for(timeout=15_000)
        assert "`" not in reason.inner_text()
        assert "worker group gpu of RayJob second: needs 8 nvidia.com/gpu" in reason.inner_text()

        # A job beyond the queue's maximum capacity is marked, not shown as waiting its turn.
        page.goto(f"{dashboard.url}/queues/{cq}")
        row = page.locator(f'#queue-order tr[data-workload^="{namespace}/rayjob-huge-"]')
        row.wait_for(timeout=15_000)
        page.wait_for_function(
            "(el) => el.textContent.includes('inadmissible: never fits')",
            arg=row.element_handle(),
            timeout=15_000,
            polling=100,
        )
        assert "request > maximum capacity (16 > 8)" in row.inner_text()

        # A queue naming a flavor that does not exist says so on the Cohorts page.
        page.goto(f"{dashboard.url}/cohorts?name={broken}")
        card = page.locator(f'section[data-cluster-queue="{broken}"]')
        card.wait_for(timeout=15_000)
        page.wait_for_function(
            "(el) => el.textContent.includes('inactive: FlavorNotFound')",
            arg=card.element_handle(),
            timeout=30_000,
            polling=100,
        )
        assert errors == []


def test_history_charts_have_time_axes_steps_and_a_legend_for_lines_drawn_on_each_other(
    dashboard: Served, quota: Quota, control_plane: Any, namespace: str, admin_token: str
) -> None:
    idle = [quota.cluster_queue(f"idle-{i}", {quota.name("a100"): 4}) for i in range(2)]
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{dashboard.url}/history#token={admin_token}")
        chart = page.locator("figure.chart").first
        chart.wait_for(timeout=15_000)
        # Both idle queues sampled more than once (one sample a second here).
        page.wait_for_function(
            "(names) => names.every((n) => document.querySelector(`figure.chart li[data-series='${n}']`))"
            " && document.querySelectorAll('figure.chart svg text.time-label').length >= 4",
            arg=idle,
            timeout=30_000,
            polling=200,
        )
        labels = chart.locator("svg text.time-label").all_text_contents()
        assert len(labels) == 5 and all(len(t.split(":")) == 3 for t in labels), labels
        # Steps: a sample holds until the next one (horizontal, then vertical moves only).
        path = chart.locator("path.line").first.get_attribute("d") or ""
        assert path.startswith("M") and "L" not in path, path
        # The later of two identical idle lines says which line it is drawn under.
        later = chart.locator(f"li[data-series='{idle[1]}']").inner_text()
        assert "same line as" in later, later
