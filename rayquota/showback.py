"""Showback: who used the quota. Resource-hours (GPU-hours, CPU-hours, ...) per ClusterQueue,
LocalQueue or namespace over a window, from what the Workloads' statuses still say.

Pure: Workloads and LocalQueues in, a report out; the CLI (:mod:`rayquota.usage_cli`) and the
dashboard's Usage page read the objects and call :func:`usage_report`.

What a Workload's status lets us recover, and what it does not (each condition keeps only its
last transition):

- an admission holding quota now: from ``QuotaReserved=True``'s transition time until the
  window's end, at the totals of ``status.admission``. A scale-up slice grows the admission
  without moving that time, so a resized admission counts at its current size from its start;
- a finished Workload: from ``QuotaReserved=True`` until ``Finished=True``. The operator drops
  ``status.admission`` when the quota is released, so the totals come from the spec (pod sets'
  requests times count) and the row says ``estimated``; the ClusterQueue is the one its
  LocalQueue points at now;
- an admission that ended by eviction (or deactivation) before the Workload was admitted again:
  the end is known, its start and totals are not: counted as ``unrecoverable``;
- a deleted Workload: gone from the API server, not counted. Neither the dashboard (its
  History ring keeps only per-ClusterQueue samples of one resource for a few hours) nor the
  operator keeps a record of past admissions.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.queueing import QuantityError, parse_quantity

GroupBy = Literal["clusterqueue", "localqueue", "namespace"]
GROUPINGS: tuple[GroupBy, ...] = ("clusterqueue", "localqueue", "namespace")
GPU = "nvidia.com/gpu"
BYTE_RESOURCES = ("memory", "ephemeral-storage")
GIB_MILLI = 1000 * 2**30
UNKNOWN = "(unknown)"
DURATION = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>[smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_moment(flag: str, value: str, now: float) -> float:
    """``24h``/``90m``/``7d`` (that long before now), ``now``, or an RFC 3339 time."""
    text = value.strip()
    if text == "now":
        return now
    match = DURATION.fullmatch(text)
    if match:
        return now - float(match["amount"]) * UNIT_SECONDS[match["unit"]]
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{flag}={value!r}: expected a duration before now (30m, 24h, 7d), 'now' or an RFC 3339 time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def window(since: str, until: str | None, now: float, flag: str = "--") -> tuple[float, float]:
    """The window ``[since, until]`` in epoch seconds; ``flag`` prefixes the names in errors."""
    start = parse_moment(f"{flag}since", since, now)
    end = parse_moment(f"{flag}until", until, now) if until else now
    if end <= start:
        raise ValueError(f"{flag}until={until or 'now'!r} must come after {flag}since={since!r}")
    return start, end


@dataclass(frozen=True)
class Interval:
    """One stretch of held quota: [start, end) in epoch seconds; end None: still held."""

    namespace: str
    workload: str
    local_queue: str
    cluster_queue: str
    start: float
    end: float | None
    totals: Mapping[str, int]
    """milli-units per resource, all pod sets together"""
    estimated: bool = False
    """totals from the spec: the admission itself is no longer in the status"""


@dataclass(frozen=True)
class Recovered:
    intervals: list[Interval]
    unrecoverable: list[str]
    """namespace/name of Workloads whose past admission left only an end time"""


@dataclass
class UsageRow:
    key: str
    hours: dict[str, float] = field(default_factory=dict)
    """resource -> resource-hours (GiB-hours for memory and storage)"""
    workloads: set[str] = field(default_factory=set)
    estimated: bool = False


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = workload.get("status") or {}
    return {str(c.get("type")): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}


def _time(condition: Mapping[str, Any] | None) -> float | None:
    if condition is None:
        return None
    moment = parse_rfc3339(condition.get("lastTransitionTime"))
    return moment.timestamp() if moment is not None else None


def admission_totals(admission: Mapping[str, Any]) -> dict[str, int]:
    """Milli-units per resource over ``status.admission.podSetAssignments[].resourceUsage``
    (each already multiplied by the pod set's admitted count)."""
    totals: dict[str, int] = {}
    for assignment in admission.get("podSetAssignments") or []:
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            totals[resource] = totals.get(resource, 0) + parse_quantity(str(amount))
    return totals


def spec_totals(workload: Mapping[str, Any]) -> dict[str, int]:
    """What the spec asks for: per pod set, its per-pod requests (``requests`` or the template's
    containers) times ``count``."""
    totals: dict[str, int] = {}
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        if pod_set.get("requests"):
            per_pod = {r: parse_quantity(str(q)) for r, q in pod_set["requests"].items()}
        else:
            per_pod = pod_requests(((pod_set.get("template") or {}).get("spec")) or {})
        count = int(pod_set.get("count", 1))
        for resource, amount in per_pod.items():
            totals[resource] = totals.get(resource, 0) + amount * count
    return totals


def workload_interval(
    workload: Mapping[str, Any], cluster_queue_of: Mapping[tuple[str, str], str]
) -> Interval | str | None:
    """The quota stretch a Workload's status shows; a reason (str) when one happened but cannot
    be measured; None when it never held quota as far as its status says."""
    meta = workload.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    local_queue = str((workload.get("spec") or {}).get("queueName") or "")
    conds = _conditions(workload)
    reserved = conds.get("QuotaReserved")
    admission = (workload.get("status") or {}).get("admission")
    finished = conds.get("Finished")
    held = reserved is not None and reserved.get("status") == "True"
    if held and admission:
        end = _time(finished) if finished is not None and finished.get("status") == "True" else None
        return _interval(
            namespace,
            name,
            local_queue,
            str(admission.get("clusterQueue")),
            reserved,
            end,
            admission_totals(admission),
            estimated=False,
        )
    if held and finished is not None and finished.get("status") == "True":
        cluster_queue = cluster_queue_of.get((namespace, local_queue), UNKNOWN)
        return _interval(
            namespace,
            name,
            local_queue,
            cluster_queue,
            reserved,
            _time(finished),
            spec_totals(workload),
            estimated=True,
        )
    evicted = conds.get("Evicted")
    if evicted is not None:
        return f"{namespace}/{name}: a past admission ended (evicted); its start and size are gone"
    return None


def _interval(
    namespace: str,
    name: str,
    local_queue: str,
    cluster_queue: str,
    reserved: Mapping[str, Any] | None,
    end: float | None,
    totals: Mapping[str, int],
    *,
    estimated: bool,
) -> Interval | str:
    start = _time(reserved)
    if start is None:
        return f"{namespace}/{name}: QuotaReserved has no lastTransitionTime"
    return Interval(namespace, name, local_queue, cluster_queue, start, end, dict(totals), estimated)


def recover(workloads: Iterable[Mapping[str, Any]], local_queues: Iterable[Mapping[str, Any]]) -> Recovered:
    cluster_queue_of = {
        (str(lq["metadata"].get("namespace")), str(lq["metadata"].get("name"))): str(
            (lq.get("spec") or {}).get("clusterQueue") or UNKNOWN
        )
        for lq in local_queues
    }
    intervals: list[Interval] = []
    unrecoverable: list[str] = []
    for workload in workloads:
        try:
            found = workload_interval(workload, cluster_queue_of)
        except (QuantityError, ValueError, TypeError) as exc:
            meta = workload.get("metadata") or {}
            found = f"{meta.get('namespace')}/{meta.get('name')}: unreadable status or spec ({exc})"
        if isinstance(found, Interval):
            intervals.append(found)
        elif found is not None:
            unrecoverable.append(found)
    return Recovered(intervals, unrecoverable)


def overlap_seconds(interval: Interval, since: float, until: float) -> float:
    """How long the interval lies inside [since, until]; an open interval runs to ``until``."""
    end = until if interval.end is None else min(interval.end, until)
    return max(0.0, end - max(interval.start, since))


def unit_hours(resource: str, milli_seconds: float) -> float:
    """milli-unit-seconds as resource-hours (GiB-hours for byte resources)."""
    divisor = GIB_MILLI if resource in BYTE_RESOURCES else 1000
    return milli_seconds / divisor / 3600


def group_key(interval: Interval, by: GroupBy) -> str:
    if by == "clusterqueue":
        return interval.cluster_queue
    if by == "localqueue":
        return f"{interval.namespace}/{interval.local_queue}"
    return interval.namespace


def usage_rows(intervals: Iterable[Interval], since: float, until: float, by: GroupBy) -> list[UsageRow]:
    """Resource-hours per group inside [since, until], most GPU-hours first."""
    if by not in GROUPINGS:
        raise ValueError(f"by={by!r}: expected one of {', '.join(GROUPINGS)}")
    if not (math.isfinite(since) and math.isfinite(until)) or until <= since:
        raise ValueError(f"window [{since}, {until}]: until must come after since")
    rows: dict[str, UsageRow] = {}
    for interval in intervals:
        seconds = overlap_seconds(interval, since, until)
        if seconds <= 0:
            continue
        row = rows.setdefault(group_key(interval, by), UsageRow(group_key(interval, by)))
        row.workloads.add(f"{interval.namespace}/{interval.workload}")
        row.estimated = row.estimated or interval.estimated
        for resource, amount in interval.totals.items():
            row.hours[resource] = row.hours.get(resource, 0.0) + unit_hours(resource, amount * seconds)
    return sorted(rows.values(), key=lambda r: (-r.hours.get(GPU, 0.0), r.key))


def usage_report(
    workloads: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    since: float,
    until: float,
    by: GroupBy,
) -> dict[str, Any]:
    """The JSON both the CLI and the dashboard give: window, grouping, resources, rows."""
    recovered = recover(workloads, local_queues)
    rows = usage_rows(recovered.intervals, since, until, by)
    resources = sorted({r for row in rows for r in row.hours}, key=lambda r: (r != GPU, r))
    return {
        "since": since,
        "until": until,
        "by": by,
        "resources": resources,
        "units": {r: unit_name(r) for r in resources},
        "rows": [
            {
                "key": row.key,
                "hours": {r: round(row.hours.get(r, 0.0), 6) for r in resources},
                "workloads": len(row.workloads),
                "estimated": row.estimated,
            }
            for row in rows
        ],
        "unrecoverable": sorted(recovered.unrecoverable),
    }


def unit_name(resource: str) -> str:
    return "GiB-hours" if resource in BYTE_RESOURCES else "hours"


def report_csv(report: Mapping[str, Any]) -> str:
    resources: Sequence[str] = report["resources"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([report["by"], *(f"{r} ({unit_name(r)})" for r in resources), "workloads", "estimated"])
    for row in report["rows"]:
        hours = [f"{row['hours'][r]:.6f}" for r in resources]
        writer.writerow([row["key"], *hours, row["workloads"], str(row["estimated"]).lower()])
    return out.getvalue()


def report_table(report: Mapping[str, Any]) -> str:
    resources: Sequence[str] = report["resources"]
    header = [report["by"].upper(), *(f"{r} ({unit_name(r)})" for r in resources), "WORKLOADS"]
    body = [
        [
            row["key"] + (" *" if row["estimated"] else ""),
            *(f"{row['hours'][r]:.2f}" for r in resources),
            "-" if row["workloads"] is None else str(row["workloads"]),
        ]
        for row in report["rows"]
    ]
    widths = [max(len(c) for c in column) for column in zip(header, *body, strict=False)]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in [header, *body]
    ]
    if any(row["estimated"] for row in report["rows"]):
        lines.append(
            "* includes finished Workloads sized from their spec (the admission is no longer recorded)"
        )
    if report["unrecoverable"]:
        lines.append(f"not counted: {len(report['unrecoverable'])} past admission(s) without a start time")
    return "\n".join(lines)
