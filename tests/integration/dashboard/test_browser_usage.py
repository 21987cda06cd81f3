"""The Usage page (showback) in a real headless Chromium against the local control plane: an
admitted RayJob's GPU-hours appear under its namespace, the page opens by its address and on
reload, the CSV download holds the same numbers, and `rayquota usage` prints them too."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.integration.dashboard.support import Served, chromium, get
from tests.integration.dashboard.test_browser_routes import open_and_reload
from tests.integration.dashboard.test_http_access import team_a_token, team_b, workload  # noqa: F401
from tests.integration.queue.conftest import Quota, admitted_workload, gpu_rayjob
from tests.integration.ray.kubehelpers import Kube
from tests.polling import wait_for

pytestmark = pytest.mark.usefixtures("dashboard_operator")
GPU = "nvidia.com/gpu"
# The export asks the dashboard's API first: on a busy 2-core machine that took over 15 s once.
DOWNLOAD_TIMEOUT_MS = 60_000


def downloaded(page: Any, button: str) -> Any:
    """The file a click on `button` downloads; a failure says what the page said."""
    try:
        with page.expect_download(timeout=DOWNLOAD_TIMEOUT_MS) as download:
            page.locator(button).click()
        return download.value
    except PlaywrightTimeout as exc:
        said = page.locator("#export-error").inner_text()
        raise AssertionError(
            f"{button}: no download in {DOWNLOAD_TIMEOUT_MS} ms; the page said {said!r}"
        ) from exc


def test_usage_page_renders_and_exports_csv_and_json(
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
        page.goto(f"{dashboard.url}/cohorts#token={admin_token}")  # signed in for this tab
        open_and_reload(page, f"{dashboard.url}/usage?by=namespace&since=1h")
        row = page.locator(f'#usage-table tr[data-usage-row="{namespace}"]')
        row.wait_for(timeout=15_000)
        assert row.locator("td").last.inner_text() == "1"  # one Workload
        gpu_hours = float(row.locator(f'td[data-resource="{GPU}"]').inner_text())
        assert gpu_hours > 0
        assert page.locator(f'figure.chart svg[aria-label^="{GPU} hours per namespace"]').count() == 1
        assert page.locator('nav a[data-nav="usage"][aria-current="page"]').count() == 1

        csv_download = downloaded(page, "#export-csv")
        assert csv_download.suggested_filename == "rayquota-usage-by-namespace.csv"
        rows = list(csv.DictReader(io.StringIO(Path(csv_download.path()).read_text())))
        ours = [r for r in rows if r["namespace"] == namespace]
        assert len(ours) == 1 and ours[0]["workloads"] == "1"
        assert float(ours[0][f"{GPU} (hours)"]) >= gpu_hours * 0.99  # the same, a moment later

        json_download = downloaded(page, "#export-json")
        exported = json.loads(Path(json_download.path()).read_text())
        assert exported["by"] == "namespace"
        assert any(r["key"] == namespace for r in exported["rows"])
        assert errors == []

    # The same answer by ClusterQueue over HTTP; the CSV is sent as a file.
    status, _, body = get(f"{dashboard.url}/api/usage?by=clusterqueue", admin_token)
    assert status == 200 and any(r["key"] == cq and r["hours"][GPU] > 0 for r in body["rows"])
    status, headers, text = get(f"{dashboard.url}/api/usage?by=clusterqueue&format=csv", admin_token)
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    assert f"\n{cq}," in text
    status, _, body = get(f"{dashboard.url}/api/usage?by=team", admin_token)
    assert status == 400 and "by='team'" in body["error"]

    # The CLI reads the same Workloads from the API server.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rayquota.cli",
            "usage",
            "--since",
            "1h",
            "--by",
            "localqueue",
            "-n",
            namespace,
            "-o",
            "csv",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, KUBECONFIG=str(control_plane.kubeconfig)),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["localqueue"] for r in lines] == [f"{namespace}/team"]
    assert float(lines[0][f"{GPU} (hours)"]) > 0


def usage_rows(dashboard: Served, token: str, by: str) -> dict[str, dict[str, Any]]:
    status, _, body = get(f"{dashboard.url}/api/usage?by={by}&since=1h", token)
    assert status == 200, body
    return {row["key"]: row for row in body["rows"]}


def test_a_viewer_of_one_namespace_counts_only_its_own_workloads(
    dashboard: Served,
    quota: Quota,
    control_plane: Any,
    namespace: str,
    team_b: str,  # noqa: F811
    team_a_token: str,  # noqa: F811
    admin_token: str,
) -> None:
    cq = quota.cluster_queue("shared", {quota.flavor("a100", "a100"): 4})
    quota.local_queue("lq", cq)
    documents = [
        {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": team_b},
            "spec": {"clusterQueue": cq},
        },
        workload(team_b, "wl-b", "lq", "b"),
        workload(namespace, "wl-a", "lq", "a"),
    ]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    both = wait_for(
        "both namespaces' GPU-hours on the admin's Usage page",
        lambda: (
            (rows := usage_rows(dashboard, admin_token, "namespace"))
            and all(rows.get(ns, {}).get("hours", {}).get(GPU, 0) > 0 for ns in (namespace, team_b))
            and rows
        ),
    )
    assert both[namespace]["workloads"] == both[team_b]["workloads"] == 1
    assert usage_rows(dashboard, admin_token, "clusterqueue")[cq]["workloads"] == 2

    assert set(usage_rows(dashboard, team_a_token, "namespace")) == {namespace}
    assert usage_rows(dashboard, team_a_token, "clusterqueue")[cq]["workloads"] == 1
    assert set(usage_rows(dashboard, team_a_token, "localqueue")) == {f"{namespace}/lq"}
