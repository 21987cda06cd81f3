"""Kueue's own metric families (``kueue_*``, pkg/metrics/metrics.go at v0.19.2), under Kueue's names,
label names and buckets, for the dashboards and alerts written for Kueue. Only the families whose
meaning rayquota has are exported; docs/operations.md lists which and why not the others.

Every family carries Kueue's ``replica_role`` label: ``leader``, since the admission loop runs only
in the replica that holds the lease (or the only one). Kueue's optional custom labels are not
offered. Amounts are in Kueue's units: whole units of the resource (cores, bytes, GPUs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from rayquota.operator.queue.kueue import kueue_shapes
from rayquota.queueing import Admit, Decision, Engine, Preempt, PreemptionReason, parse_quantity

REPLICA_ROLE = "leader"


def _exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets``: 1, then 2.5 doubling ``count - 1`` times."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


ADMISSION_ATTEMPTS = Counter(
    "kueue_admission_attempts_total",
    "Admission cycles: 'success' when one admitted at least one workload, else 'inadmissible'",
    ["result", "replica_role"],
)
ADMISSION_ATTEMPT_DURATION = Histogram(
    "kueue_admission_attempt_duration_seconds",
    "Time one admission cycle took, by its result",
    ["result", "replica_role"],
)
PENDING = Gauge(
    "kueue_pending_workloads",
    "Pending workloads per ClusterQueue: 'active' (in the admission queue) or 'inadmissible' "
    "(parked until something that could let them fit changes)",
    ["cluster_queue", "status", "replica_role"],
)
RESERVING_ACTIVE = Gauge(
    "kueue_reserving_active_workloads",
    "Workloads holding a quota reservation, per ClusterQueue",
    ["cluster_queue", "replica_role"],
)
ADMITTED_ACTIVE = Gauge(
    "kueue_admitted_active_workloads",
    "Admitted workloads (reservation and every admission check Ready), per ClusterQueue",
    ["cluster_queue", "replica_role"],
)
CLUSTER_QUEUE_STATUS = Gauge(
    "kueue_cluster_queue_status",
    "1 for the ClusterQueue's status: 'pending' (inactive), 'active' or 'terminating'",
    ["cluster_queue", "status", "replica_role"],
)


@dataclass(frozen=True)
class _AdmissionFamilies:
    """Kueue's four admission families of one scope (per ClusterQueue, or per LocalQueue):
    quota reservations and admissions counted, and the wait before each."""

    reserved: Counter
    admitted: Counter
    reserved_wait: Histogram
    admission_wait: Histogram

    def observe(self, labels: Sequence[str], waited_s: float) -> None:
        # Reservation and admission are one moment here: the gate opens when every check is Ready.
        self.reserved.labels(*labels, REPLICA_ROLE).inc()
        self.admitted.labels(*labels, REPLICA_ROLE).inc()
        self.reserved_wait.labels(*labels, REPLICA_ROLE).observe(waited_s)
        self.admission_wait.labels(*labels, REPLICA_ROLE).observe(waited_s)


CLUSTER_QUEUE_WEIGHTED_SHARE = Gauge(
    "kueue_cluster_queue_weighted_share",
    "The ClusterQueue's share of what its cohort lends (largest over resources) over its weight",
    ["cluster_queue", "cohort", "replica_role"],
)
COHORT_WEIGHTED_SHARE = Gauge(
    "kueue_cohort_weighted_share",
    "The Cohort's share of what its parent lends (largest over resources) over its weight",
    ["cohort", "replica_role"],
)
LOCAL_QUEUE_AFS_USAGE = Gauge(
    "kueue_local_queue_admission_fair_sharing_usage",
    "The LocalQueue's decayed, resource-weighted usage over its weight (admission fair sharing)",
    ["name", "namespace", "cluster_queue", "replica_role"],
)


def _admission_families(
    prefix: str, scope: str, labels: list[str], admission_buckets: int
) -> _AdmissionFamilies:
    """``prefix``: ``kueue_`` or ``kueue_local_queue_``; Kueue gives the ClusterQueue's admission
    wait 16 buckets and every other wait 14."""
    names = [*labels, "priority_class", "replica_role"]
    return _AdmissionFamilies(
        Counter(
            f"{prefix}quota_reserved_workloads_total", f"Quota reservations of workloads, per {scope}", names
        ),
        Counter(f"{prefix}admitted_workloads_total", f"Admissions of workloads, per {scope}", names),
        Histogram(
            f"{prefix}quota_reserved_wait_time_seconds",
            f"From the Workload's creation to its quota reservation, per {scope}",
            names,
            buckets=_exponential_buckets(14),
        ),
        Histogram(
            f"{prefix}admission_wait_time_seconds",
            f"From the Workload's creation to its admission, per {scope}",
            names,
            buckets=_exponential_buckets(admission_buckets),
        ),
    )


CLUSTER_QUEUE_ADMISSIONS = _admission_families("kueue_", "ClusterQueue", ["cluster_queue"], 16)
LOCAL_QUEUE_ADMISSIONS = _admission_families("kueue_local_queue_", "LocalQueue", ["name", "namespace"], 14)
EVICTED = Counter(
    "kueue_evicted_workloads_total",
    "Evictions, per ClusterQueue and Kueue's reason (Preempted, PodsReadyTimeout, AdmissionCheck, "
    "ClusterQueueStopped, Deactivated)",
    ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
)
PREEMPTED = Counter(
    "kueue_preempted_workloads_total",
    "Workloads preempted, per preempting ClusterQueue and reason (InClusterQueue, "
    "InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)",
    ["preempting_cluster_queue", "reason", "replica_role"],
)
REPLACED_SLICES = Counter(
    "kueue_replaced_workload_slices_total",
    "Workload slices replaced by their successor's admission, per ClusterQueue",
    ["cluster_queue", "replica_role"],
)


def _per_resource(family: str, help_text: str, labels: list[str]) -> Gauge:
    return Gauge(family, help_text, [*labels, "flavor", "resource", "replica_role"])


_CQ = ["cohort", "cluster_queue"]
RESOURCE_RESERVATION = _per_resource(
    "kueue_cluster_queue_resource_reservation", "Quota reserved by workloads", _CQ
)
RESOURCE_USAGE = _per_resource("kueue_cluster_queue_resource_usage", "Quota used by admitted workloads", _CQ)
NOMINAL_QUOTA = _per_resource("kueue_cluster_queue_nominal_quota", "Nominal quota", _CQ)
BORROWING_LIMIT = _per_resource(
    "kueue_cluster_queue_borrowing_limit", "Borrowing limit (+Inf when unlimited)", _CQ
)
LENDING_LIMIT = _per_resource("kueue_cluster_queue_lending_limit", "Lending limit (+Inf when unlimited)", _CQ)

# Per LocalQueue (Kueue exports these behind its LocalQueueMetrics gate; its label ``name`` is the
# LocalQueue's name).
_LQ = ["name", "namespace"]
LOCAL_QUEUE_PENDING = Gauge(
    "kueue_local_queue_pending_workloads",
    "Pending workloads per LocalQueue: 'active' (not judged by a cycle yet) or 'inadmissible' "
    "(a cycle did not admit them; they carry a pending reason)",
    [*_LQ, "status", "replica_role"],
)
LOCAL_QUEUE_RESERVING_ACTIVE = Gauge(
    "kueue_local_queue_reserving_active_workloads",
    "Workloads holding a quota reservation, per LocalQueue",
    [*_LQ, "replica_role"],
)
LOCAL_QUEUE_ADMITTED_ACTIVE = Gauge(
    "kueue_local_queue_admitted_active_workloads",
    "Admitted workloads, per LocalQueue",
    [*_LQ, "replica_role"],
)
LOCAL_QUEUE_STATUS = Gauge(
    "kueue_local_queue_status",
    "1 for the LocalQueue's Active condition status: 'True', 'False' or 'Unknown'",
    [*_LQ, "active", "replica_role"],
)
LOCAL_QUEUE_EVICTED = Counter(
    "kueue_local_queue_evicted_workloads_total",
    "Evictions per LocalQueue and Kueue's reason (as kueue_evicted_workloads_total)",
    [*_LQ, "reason", "underlying_cause", "priority_class", "replica_role"],
)
LOCAL_QUEUE_RESOURCE_RESERVATION = _per_resource(
    "kueue_local_queue_resource_reservation", "Quota reserved by the LocalQueue's workloads", _LQ
)
LOCAL_QUEUE_RESOURCE_USAGE = _per_resource(
    "kueue_local_queue_resource_usage", "Quota used by the LocalQueue's admitted workloads", _LQ
)

# The engine's eviction kinds in Kueue's ``reason`` and ``underlying_cause`` words.
_PREEMPTIONS = {
    PreemptionReason.IN_CLUSTER_QUEUE,
    PreemptionReason.RECLAIM_WITHIN_COHORT,
    PreemptionReason.BORROW_WITHIN_COHORT,
    PreemptionReason.FAIR_SHARING,
}
_EVICTION_WORDS: Mapping[str, tuple[str, str]] = {
    PreemptionReason.STOPPED: ("ClusterQueueStopped", ""),
    PreemptionReason.DEACTIVATED: ("Deactivated", ""),
    PreemptionReason.ADMISSION_CHECK: ("AdmissionCheck", ""),
    PreemptionReason.ADMISSION_CHECK_REJECTED: ("Deactivated", "AdmissionCheck"),
}


def eviction_words(kind: str) -> tuple[str, str]:
    """Kueue's ``reason`` and ``underlying_cause`` for an eviction of the engine's ``kind``
    (a preemption is ``Preempted``; others, PodsReadyTimeout included, keep their name)."""
    if kind in _PREEMPTIONS:
        return "Preempted", ""
    return _EVICTION_WORDS.get(kind, (kind, ""))


def _amount(milli: int | None) -> float:
    return float("inf") if milli is None else milli / 1000


def priority_class_of(workload: Mapping[str, Any]) -> str:
    """The Workload's priority class name ("" when none), as Kueue labels its metrics."""
    spec = kueue_shapes.rayquota_spec(workload.get("spec") or {})
    return str(spec.get("priorityClassName") or "")


def observe_cycle(
    seconds: float, decisions: Sequence[Decision], cluster_queue_of: Callable[[str], str | None]
) -> None:
    """A cycle's attempt, preemptions and replaced slices. ``cluster_queue_of``: an engine key's
    ClusterQueue (the preemptor's)."""
    if not decisions:
        return
    result = "success" if any(isinstance(d, Admit) for d in decisions) else "inadmissible"
    ADMISSION_ATTEMPTS.labels(result, REPLICA_ROLE).inc()
    ADMISSION_ATTEMPT_DURATION.labels(result, REPLICA_ROLE).observe(seconds)
    for decision in decisions:
        match decision:
            case Admit(replaces=str()):
                REPLACED_SLICES.labels(decision.cluster_queue, REPLICA_ROLE).inc()
            case Preempt(preemptor=str() as preemptor):
                preempting = cluster_queue_of(preemptor) or ""
                for victim in decision.victims:
                    kind = decision.victim_kinds.get(victim, decision.kind)
                    if kind in _PREEMPTIONS:
                        PREEMPTED.labels(preempting, str(kind), REPLICA_ROLE).inc()


def observe_eviction(
    cluster_queue: str | None, kind: str, local_queue: tuple[str, str] | None = None
) -> None:
    """An eviction, per ClusterQueue and (``local_queue``: namespace, name) per LocalQueue."""
    reason, cause = eviction_words(kind)
    # The priority class is not known where evictions are decided: Kueue's label is left empty.
    EVICTED.labels(cluster_queue or "", reason, cause, "", REPLICA_ROLE).inc()
    if local_queue is not None:
        namespace, name = local_queue
        LOCAL_QUEUE_EVICTED.labels(name, namespace, reason, cause, "", REPLICA_ROLE).inc()


def observe_admission(workload: Mapping[str, Any], cluster_queue: str, waited_s: float) -> None:
    """A workload's admission, once written: its ClusterQueue's families and its LocalQueue's."""
    priority_class = priority_class_of(workload)
    CLUSTER_QUEUE_ADMISSIONS.observe((cluster_queue, priority_class), waited_s)
    queue = kueue_shapes.rayquota_spec(workload.get("spec") or {}).get("queueName")
    if queue:
        namespace = str(workload["metadata"].get("namespace") or "")
        LOCAL_QUEUE_ADMISSIONS.observe((str(queue), namespace, priority_class), waited_s)


def observe_cluster_queue_status(cluster_queue: str, active: bool, terminating: bool) -> None:
    current = "terminating" if terminating else "active" if active else "pending"
    for status in ("pending", "active", "terminating"):
        CLUSTER_QUEUE_STATUS.labels(cluster_queue, status, REPLICA_ROLE).set(1 if status == current else 0)


def observe_queues(engine: Engine) -> None:
    """Gauges from the engine's view of every ClusterQueue (called at the status rate)."""
    for node in engine.snapshot():
        if not node.is_cluster_queue:
            continue
        status = engine.cluster_queue_status(node.name)
        PENDING.labels(node.name, "active", REPLICA_ROLE).set(status.pending_active)
        PENDING.labels(node.name, "inadmissible", REPLICA_ROLE).set(status.pending_inadmissible)
        RESERVING_ACTIVE.labels(node.name, REPLICA_ROLE).set(status.admitted)
        ADMITTED_ACTIVE.labels(node.name, REPLICA_ROLE).set(status.admitted - status.awaiting_checks)
        cohort = node.parent or ""
        for (flavor, resource), (nominal, borrowing, lending) in node.quota.items():
            labels = (cohort, node.name, flavor, resource, REPLICA_ROLE)
            used = _amount(status.usage.get((flavor, resource), 0))
            NOMINAL_QUOTA.labels(*labels).set(_amount(nominal))
            BORROWING_LIMIT.labels(*labels).set(_amount(borrowing))
            LENDING_LIMIT.labels(*labels).set(_amount(lending))
            # Quota is held until the pods that used it are gone: what is reserved is in use.
            RESOURCE_RESERVATION.labels(*labels).set(used)
            RESOURCE_USAGE.labels(*labels).set(used)


def observe_local_queue(
    namespace: str, name: str, status: Mapping[str, Any], pending_inadmissible: int, active: bool
) -> None:
    """Gauges of one LocalQueue from the status just computed for it (rayquota.io's shape:
    counts, and ``flavorsReservation[].resources[].total``) and how many of its pending
    workloads a cycle already judged (:func:`judged_pending`)."""
    pending = int(status.get("pendingWorkloads") or 0)
    LOCAL_QUEUE_PENDING.labels(name, namespace, "active", REPLICA_ROLE).set(pending - pending_inadmissible)
    LOCAL_QUEUE_PENDING.labels(name, namespace, "inadmissible", REPLICA_ROLE).set(pending_inadmissible)
    LOCAL_QUEUE_RESERVING_ACTIVE.labels(name, namespace, REPLICA_ROLE).set(
        int(status.get("reservingWorkloads") or 0)
    )
    LOCAL_QUEUE_ADMITTED_ACTIVE.labels(name, namespace, REPLICA_ROLE).set(
        int(status.get("admittedWorkloads") or 0)
    )
    for value in ("True", "False", "Unknown"):
        on = value == ("True" if active else "False")
        LOCAL_QUEUE_STATUS.labels(name, namespace, value, REPLICA_ROLE).set(1 if on else 0)
    for flavor in status.get("flavorsReservation") or []:
        for resource in flavor.get("resources") or []:
            labels = (name, namespace, str(flavor["name"]), str(resource["name"]), REPLICA_ROLE)
            amount = parse_quantity(str(resource.get("total") or "0")) / 1000
            # Quota is held until the pods that used it are gone: what is reserved is in use.
            LOCAL_QUEUE_RESOURCE_RESERVATION.labels(*labels).set(amount)
            LOCAL_QUEUE_RESOURCE_USAGE.labels(*labels).set(amount)


def judged_pending(workloads: Sequence[Mapping[str, Any]], not_yet_evaluated: str) -> int:
    """Of the pending (unadmitted, unfinished) workloads, those whose QuotaReserved condition
    carries a cycle's pending reason (Kueue's 'inadmissible': a failed admission attempt)."""
    count = 0
    for wl in workloads:
        status = wl.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        if status.get("admission") or (conds.get("Finished") or {}).get("status") == "True":
            continue
        reserved = conds.get("QuotaReserved") or {}
        if reserved.get("status") == "False" and reserved.get("message") not in (None, "", not_yet_evaluated):
            count += 1
    return count


def observe_cluster_queue_weighted_share(cluster_queue: str, cohort: str, share: float) -> None:
    """Fair sharing's share, unrounded (NaN for a borrowing queue of weight 0, as Kueue)."""
    CLUSTER_QUEUE_WEIGHTED_SHARE.labels(cluster_queue, cohort, REPLICA_ROLE).set(share)


def observe_cohort_weighted_share(cohort: str, share: float) -> None:
    COHORT_WEIGHTED_SHARE.labels(cohort, REPLICA_ROLE).set(share)


def observe_admission_fair_sharing_usage(name: str, namespace: str, cluster_queue: str, usage: float) -> None:
    LOCAL_QUEUE_AFS_USAGE.labels(name, namespace, cluster_queue, REPLICA_ROLE).set(usage)
