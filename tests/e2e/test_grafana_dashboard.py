"""The Grafana dashboard (docs/grafana/rayquota.json) against a real Prometheus (Debian's
``prometheus``) scraping a real ``rayquota run``: every panel's every query, with the dashboard's
variables as Grafana fills them for "All", parses and returns at least one series for a scenario
that should have one (a queued RayCluster admitted, then evicted by stopping its ClusterQueue; a
Workload that never fits; a RayJob that fails; a RayService). Debian has no Grafana package, so
the queries are run by Prometheus itself rather than through a Grafana."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from tests.e2e.test_kuberay_metrics import operator_metrics, quickstart  # noqa: F401 (a fixture)
from tests.polling import wait_for
from tests.prometheus_server import prometheus_scraping
from tests.quota import QUEUE, Quota, quota  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("crds_installed")

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "rayquota.json"
WINDOW = "5m"  # what $__rate_interval stands for here


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f"{panel['title']} [{target['refId']}]", str(target["expr"]))
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def filled(expr: str, namespace: str) -> str:
    """As Grafana expands the variables with "All" chosen (allValue ".*"); the namespace is the
    test's, so no other test's objects answer."""
    for name, value in (("$__rate_interval", WINDOW), ("$cluster_queue", ".*"), ("$resource", ".*")):
        expr = expr.replace(name, value)
    return expr.replace("$namespace", namespace)


def query(url: str, expr: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(expr)}", timeout=10) as got:
        answer: dict[str, Any] = json.loads(got.read())
    return answer


def series(url: str, expr: str) -> list[dict[str, Any]]:
    try:
        answer = query(url, expr)
    except OSError:
        return []
    return list(answer["data"]["result"]) if answer.get("status") == "success" else []


@pytest.fixture
def prometheus(operator_metrics: str, tmp_path: Path) -> Iterator[str]:  # noqa: F811
    target = urllib.parse.urlsplit(operator_metrics).netloc
    scraped = ("Prometheus to scrape the operator", lambda url: series(url, "rayquota_workqueue_depth"))
    with prometheus_scraping(target, tmp_path, scraped) as url:
        yield url


def test_every_panel_query_returns_series(
    control_plane: LocalCluster,
    namespace: str,
    quota: Quota,  # noqa: F811
    prometheus: str,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = panel_queries(dashboard)
    assert len(queries) >= 20
    cluster = quickstart("raycluster", namespace)
    cluster["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = QUEUE
    rayjob = quickstart("rayjob", namespace, activeDeadlineSeconds=2, backoffLimit=0)
    service = quickstart("rayservice", namespace)
    never_fits = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "never-fits", "namespace": namespace},
        "spec": {"queueName": QUEUE, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1000"}}]},
    }
    documents = [cluster, rayjob, service, never_fits]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    cq = f'cluster_queue="{quota.cluster_queue}"'
    ns = f'namespace="{namespace}"'
    wait_for(
        "the cluster admitted and provisioned, the RayJob failed, as Prometheus has them",
        lambda: all(
            series(prometheus, expr)
            for expr in (
                f"kueue_admission_wait_time_seconds_count{{{cq}}} > 0",
                f'kuberay_cluster_condition_provisioned{{{ns}, condition="true"}}',
                f'kuberay_job_deployment_status{{{ns}, deployment_status="Failed"}}',
            )
        ),
        timeout_s=180,
        interval_s=1,
    )
    control_plane.kubectl(
        "patch", "clusterqueues.rayquota.io", quota.cluster_queue, "--type=merge",
        "-p", json.dumps({"spec": {"stopPolicy": "HoldAndDrain"}}),
    )  # fmt: skip
    evictions = f"kueue_evicted_workloads_total{{{cq}}}[{WINDOW}]"
    wait_for(
        "the eviction scraped twice (increase needs two samples)",
        lambda: any(len(s["values"]) >= 2 for s in series(prometheus, evictions)),
        timeout_s=60,
        interval_s=1,
    )
    empty = []
    for title, expr in queries:
        answer = query(prometheus, filled(expr, namespace))
        assert answer["status"] == "success", (title, answer)
        if not answer["data"]["result"]:
            empty.append(title)
    assert empty == [], f"panels without a series: {empty}"
