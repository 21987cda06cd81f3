"""Showback per ClusterQueue from Prometheus: the operator's usage gauge
(``rayquota_cluster_queue_resource_usage``, whole units per ClusterQueue, flavor and resource)
integrated over the window with one instant query. Unlike :mod:`rayquota.showback` it counts
deleted Workloads and earlier admissions too, as far as Prometheus kept the samples; it cannot
say which LocalQueue or namespace held the quota.

The integral is a subquery sampled every ``step`` seconds (each sample the gauge's last value,
as Prometheus looks back): ``sum_over_time(...) * step / 3600`` resource-hours. Series of a
former leader are taken once per label set (``max``), as the History page does.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from rayquota.showback import BYTE_RESOURCES, GPU, unit_name

USAGE_METRIC = "rayquota_cluster_queue_resource_usage"
TIMEOUT_S = 30.0
MAX_STEPS = 11_000
"""Samples per series in the subquery, to keep a long window's query cheap."""


def integral_query(window_s: float, step_s: float) -> str:
    inner = f"max by (cluster_queue, flavor, resource) ({USAGE_METRIC})"
    subquery = f"({inner})[{int(window_s)}s:{int(step_s)}s]"
    return f"sum by (cluster_queue, resource) (sum_over_time({subquery})) * {int(step_s)} / 3600"


def step_for(window_s: float, step_s: float) -> float:
    """The step asked for, no longer than the window (a window shorter than the step would hold
    no sample), and coarser when the window would need more than MAX_STEPS."""
    return float(max(min(int(step_s), int(window_s)), math.ceil(window_s / MAX_STEPS), 1))


def parse_vector(answer: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``cluster_queue`` -> {resource: resource-hours} from an instant query's answer."""
    if answer.get("status") != "success":
        raise ValueError(f"Prometheus answered {answer.get('errorType') or 'error'}: {answer.get('error')}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise ValueError(f"Prometheus answered a {data.get('resultType')!r}, expected a vector")
    hours: dict[str, dict[str, float]] = {}
    for sample in data.get("result") or []:
        labels = sample.get("metric") or {}
        resource = str(labels.get("resource") or "")
        value = float(sample["value"][1])
        if resource in BYTE_RESOURCES:
            value /= 2**30
        if math.isfinite(value):
            hours.setdefault(str(labels.get("cluster_queue") or ""), {})[resource] = value
    return hours


def report_from(hours: Mapping[str, Mapping[str, float]], since: float, until: float) -> dict[str, Any]:
    """The same shape as :func:`rayquota.showback.usage_report` (by ClusterQueue; no Workload
    counts: Prometheus does not know them)."""
    resources = sorted({r for row in hours.values() for r in row}, key=lambda r: (r != GPU, r))
    keys = sorted(hours, key=lambda k: (-hours[k].get(GPU, 0.0), k))
    return {
        "since": since,
        "until": until,
        "by": "clusterqueue",
        "source": "prometheus",
        "resources": resources,
        "units": {r: unit_name(r) for r in resources},
        "rows": [
            {
                "key": key,
                "hours": {r: round(hours[key].get(r, 0.0), 6) for r in resources},
                "workloads": None,
                "estimated": False,
            }
            for key in keys
        ],
        "unrecoverable": [],
    }


def fetch_report(url: str, since: float, until: float, step_s: float = 15.0) -> dict[str, Any]:
    """One instant query at ``until`` (blocking); a failing Prometheus raises ValueError."""
    step = step_for(until - since, step_s)
    params = urllib.parse.urlencode({"query": integral_query(until - since, step), "time": f"{until:.3f}"})
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{params}", timeout=TIMEOUT_S) as answer:
            raw = answer.read()
    except urllib.error.HTTPError as exc:  # Prometheus says why in JSON
        raw = exc.read()
    except OSError as exc:
        raise ValueError(f"Prometheus at {url} could not be read: {exc}") from exc
    try:
        body = json.loads(raw)
    except ValueError:
        raise ValueError(f"Prometheus at {url} did not answer JSON: {raw[:200]!r}") from None
    return report_from(parse_vector(body), since, until)
