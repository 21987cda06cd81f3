"""Turning a simulation into numbers (JSON) and a short summary (the chart: ``chart.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rayquota.queueing import format_quantity
from rayquota.queueing.topology.fit import level_name

from .simulator import SimulationResult, WorkloadRecord


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def wait_stats(records: Iterable[WorkloadRecord]) -> dict[str, Any]:
    waits: list[float] = []
    never = preemptions = count = 0
    last = 0
    for rec in records:
        count += 1
        preemptions += rec.preemptions
        if rec.admitted_ms is None:
            never += 1
        else:
            waits.append((rec.admitted_ms - rec.arrival_ms) / 1000)
        if rec.finished_ms is not None:
            last = max(last, rec.finished_ms)
    waits.sort()
    return {
        "workloads": count,
        "admitted": len(waits),
        "never_admitted": never,
        "preemptions": preemptions,
        "wait_s": {
            "mean": round(sum(waits) / len(waits), 4) if waits else 0.0,
            "p50": percentile(waits, 0.50),
            "p90": percentile(waits, 0.90),
            "p99": percentile(waits, 0.99),
        },
        "makespan_s": last / 1000,
    }


def build_report(result: SimulationResult) -> dict[str, Any]:
    by_class: dict[str, list[WorkloadRecord]] = {}
    by_queue: dict[str, list[WorkloadRecord]] = {}
    for rec in result.records:
        by_class.setdefault(rec.workload_class, []).append(rec)
        by_queue.setdefault(rec.cluster_queue, []).append(rec)
    span = max(result.makespan_ms, 1)
    utilisation = {
        resource: round(result.total.integral.get(resource, 0) / (capacity * span), 4)
        for resource, capacity in result.capacity.items()
        if capacity > 0
    }
    queues: dict[str, Any] = {}
    for name, recs in by_queue.items():
        stats = wait_stats(recs)
        integral = result.per_queue[name].integral if name in result.per_queue else {}
        nominal = result.queue_nominal.get(name, {})
        stats["utilisation_of_nominal"] = {
            r: round(integral.get(r, 0) / (q * span), 4) for r, q in nominal.items() if q > 0
        }
        queues[name] = stats
    overall = wait_stats(result.records)
    bound_s = result.capacity_bound_ms / 1000
    makespan_s = result.makespan_ms / 1000
    step = max(1, len(result.timeline) // 2000)
    wasted_s = max(
        (result.wasted.get(r, 0) / c / 1000 for r, c in result.capacity.items() if c > 0), default=0.0
    )
    report: dict[str, Any] = {
        "scenario": result.scenario.name,
        "makespan_s": makespan_s,
        "capacity_bound_s": bound_s,
        "arrival_bound_s": result.arrival_bound_ms / 1000,
        "makespan_over_bound": round(makespan_s / bound_s, 4) if bound_s else None,
        "wasted_work_s": round(wasted_s, 3),
        "bound_with_waste_s": round(bound_s + wasted_s, 3),
        "workloads": overall["workloads"],
        "admitted": overall["admitted"],
        "never_admitted": overall["never_admitted"],
        "preemptions": overall["preemptions"],
        "wait_s": overall["wait_s"],
        "cycles": result.cycles,
        "decisions": result.decisions,
        "engine_seconds": round(result.engine_seconds, 3),
        "capacity": {r: format_quantity(q, r) for r, q in result.capacity.items()},
        "utilisation_mean": utilisation,
        "classes": {name: wait_stats(recs) for name, recs in by_class.items()},
        "queues": queues,
        "timeline": [
            {
                "t": t / 1000,
                "pending": pending,
                "utilisation": {
                    r: round(usage.get(r, 0) / c, 4) for r, c in result.capacity.items() if c > 0
                },
            }
            for t, usage, pending in result.timeline[::step]
        ],
    }
    if result.domains is not None:
        use = result.domains
        report["domains"] = {
            "level": use.level,
            "resource": use.resource,
            "per_domain": {
                domain: {
                    "capacity": format_quantity(capacity, use.resource),
                    "utilisation_mean": round(use.used.integral.get(domain, 0) / (capacity * span), 4),
                    "utilisation_peak": round(use.peak.get(domain, 0) / capacity, 4),
                }
                for domain, capacity in sorted(use.capacity.items())
                if capacity > 0
            },
        }
    return report


def summary(report: dict[str, Any]) -> str:
    lines = [
        f"scenario {report['scenario']}: {report['workloads']} workloads, "
        f"{report['admitted']} admitted, {report['never_admitted']} never admitted",
        f"  makespan {report['makespan_s']:.2f} s; capacity bound {report['capacity_bound_s']:.2f} s "
        f"(ratio {report['makespan_over_bound']}); preemptions {report['preemptions']} wasted "
        f"{report['wasted_work_s']} s of full capacity",
        "  utilisation " + ", ".join(f"{r} {100 * u:.1f}%" for r, u in report["utilisation_mean"].items()),
        f"  engine: {report['cycles']} cycles, {report['decisions']} decisions, {report['engine_seconds']} s",
    ]
    domains = report.get("domains")
    if domains:
        lines.append(
            f"  {domains['resource']} use per {level_name(domains['level'])} (mean/peak): "
            + ", ".join(
                f"{d} {100 * u['utilisation_mean']:.0f}%/{100 * u['utilisation_peak']:.0f}%"
                for d, u in domains["per_domain"].items()
            )
        )
    for name, stats in report["classes"].items():
        w = stats["wait_s"]
        lines.append(
            f"  class {name}: wait mean {w['mean']:.2f} s, p50 {w['p50']:.2f}, p90 {w['p90']:.2f}, "
            f"p99 {w['p99']:.2f}; preempted {stats['preemptions']}"
        )
    return "\n".join(lines)
