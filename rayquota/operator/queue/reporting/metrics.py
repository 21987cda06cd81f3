"""Prometheus metrics of the queue integration, Kueue's equivalents prefixed ``rayquota_``; Kueue's
own ``kueue_*`` families beside them are in :mod:`kueue_metrics`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.queue.reporting import kueue_metrics
from rayquota.queueing import Admit, Decision, Engine, Pending, Preempt

_WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)

PENDING = Gauge(
    "rayquota_pending_workloads",
    "Workloads waiting for quota, per ClusterQueue and status: active (the next admission cycle "
    "looks at them) or inadmissible (parked until something that could let them fit changes)",
    ["cluster_queue", "status"],
)
ADMITTED_ACTIVE = Gauge(
    "rayquota_admitted_active_workloads",
    "Admitted workloads holding quota, per ClusterQueue",
    ["cluster_queue"],
)
ADMISSION_ATTEMPTS = Counter(
    "rayquota_admission_attempts_total", "Workloads looked at by admission cycles, by result", ["result"]
)
CYCLE_DURATION = Histogram("rayquota_admission_cycle_duration_seconds", "Time one admission cycle took")
ADMISSIONS = Counter("rayquota_admitted_workloads_total", "Admissions (slices included)", ["cluster_queue"])
QUOTA_RESERVED_WAIT = Histogram(
    "rayquota_quota_reserved_wait_time_seconds",
    "From Workload creation to its first quota reservation",
    ["cluster_queue"],
    buckets=_WAIT_BUCKETS,
)
ADMISSION_WAIT = Histogram(
    "rayquota_admission_wait_time_seconds",
    "From Workload creation to its first admission (pods may start)",
    ["cluster_queue"],
    buckets=_WAIT_BUCKETS,
)
USAGE = Gauge(
    "rayquota_cluster_queue_resource_usage", "Quota in use", ["cluster_queue", "flavor", "resource"]
)
NOMINAL = Gauge(
    "rayquota_cluster_queue_nominal_quota", "Nominal quota", ["cluster_queue", "flavor", "resource"]
)
BORROWING = Gauge(
    "rayquota_cluster_queue_borrowing",
    "Quota borrowed from the cohort",
    ["cluster_queue", "flavor", "resource"],
)
CYCLES_WAITING_FOR_WRITES = Gauge(
    "rayquota_admission_cycles_waiting_for_writes",
    "Workload status writes that free quota (a smaller admission, Finished) not stored yet: "
    "while above 0 no admission cycle runs, so the freed quota goes to no one before they land",
)
EVICTIONS = Counter("rayquota_evicted_workloads_total", "Workloads evicted, by reason", ["reason"])
PREEMPTIONS = Counter("rayquota_preempted_workloads_total", "Workloads preempted, by reason", ["reason"])


def observe_cycle(seconds: float, decisions: Sequence[Decision]) -> None:
    CYCLE_DURATION.observe(seconds)
    for decision in decisions:
        match decision:
            case Admit():
                ADMISSION_ATTEMPTS.labels("success").inc()
            case Pending():
                ADMISSION_ATTEMPTS.labels("inadmissible").inc()
            case Preempt():
                for victim in decision.victims:
                    PREEMPTIONS.labels(str(decision.victim_kinds.get(victim, decision.kind))).inc()


def observe_queues(engine: Engine) -> None:
    """Gauges from the engine's view of every ClusterQueue (called at the status rate), Kueue's
    families (:mod:`kueue_metrics`) too."""
    kueue_metrics.observe_queues(engine)
    for node in engine.snapshot():
        if not node.is_cluster_queue:
            continue
        status = engine.cluster_queue_status(node.name)
        PENDING.labels(node.name, "active").set(status.pending_active)
        PENDING.labels(node.name, "inadmissible").set(status.pending_inadmissible)
        ADMITTED_ACTIVE.labels(node.name).set(status.admitted)
        for (flavor, resource), (nominal, _, _) in node.quota.items():
            NOMINAL.labels(node.name, flavor, resource).set(nominal / 1000)
            USAGE.labels(node.name, flavor, resource).set(status.usage.get((flavor, resource), 0) / 1000)
            BORROWING.labels(node.name, flavor, resource).set(
                status.borrowed.get((flavor, resource), 0) / 1000
            )


def observe_admission_wait(workload: Mapping[str, Any], cluster_queue: str) -> None:
    """An admission, once announced: how long its Workload waited since it was created."""
    created = parse_rfc3339(workload["metadata"].get("creationTimestamp"))
    if created is not None:
        waited = max(0.0, (dt.datetime.now(dt.UTC) - created).total_seconds())
        QUOTA_RESERVED_WAIT.labels(cluster_queue).observe(waited)
        ADMISSION_WAIT.labels(cluster_queue).observe(waited)
        kueue_metrics.observe_admission(workload, cluster_queue, waited)
