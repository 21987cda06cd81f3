"""`rayquota usage --prometheus-url`: GPU-hours per ClusterQueue integrated from the operator's
usage gauge in a real Prometheus (Debian's, on loopback) scraping it every second."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
from typing import Any

import pytest

from rayquota import showback_prometheus
from rayquota.ports import free_port
from tests.integration.dashboard.test_history_prometheus import exporter, get_json, prometheus  # noqa: F401
from tests.polling import wait_for

GPU = "nvidia.com/gpu"
WINDOW_S = 5.0


def samples_in_last_minute(url: str, queue: str) -> int:
    query = f'count_over_time(rayquota_cluster_queue_resource_usage{{cluster_queue="{queue}"}}[1m])'
    answer: Any = get_json(f"{url}/api/v1/query?query={urllib.parse.quote(query)}")
    return int(float(answer["data"]["result"][0]["value"][1])) if answer["data"]["result"] else 0


def test_gpu_hours_per_cluster_queue_from_prometheus(prometheus: str) -> None:  # noqa: F811
    # Enough history for the window: at least WINDOW_S + 3 scrapes of both queues.
    wait_for(
        "Prometheus to hold several seconds of both queues' usage",
        lambda: min(samples_in_last_minute(prometheus, q) for q in ("team-a", "team-b")) >= WINDOW_S + 3,
        timeout_s=90,
    )
    until = time.time()
    report = showback_prometheus.fetch_report(prometheus, until - WINDOW_S, until, step_s=1)
    rows = {row["key"]: row["hours"][GPU] for row in report["rows"]}
    # The exporter's team-a holds 3 GPUs, team-b 4 (its other two jobs wait): the same number of
    # steps for both, so exactly 3:4, and about WINDOW_S seconds' worth of each.
    assert set(rows) == {"team-a", "team-b"}
    assert rows["team-b"] / rows["team-a"] == pytest.approx(4 / 3)
    assert 3 * (WINDOW_S - 1) / 3600 <= rows["team-a"] <= 3 * (WINDOW_S + 1) / 3600

    cli = [sys.executable, "-m", "rayquota.cli", "usage", "--since", "5s", "-o", "json"]
    result = subprocess.run(
        [*cli, "--prometheus-url", prometheus], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["source"] == "prometheus" and {r["key"] for r in answer["rows"]} == {"team-a", "team-b"}

    closed = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [*cli, "--prometheus-url", closed], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and f"Prometheus at {closed} could not be read" in result.stderr
