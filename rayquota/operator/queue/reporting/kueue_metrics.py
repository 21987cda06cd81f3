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


def _gauge(name: str, help_text: str, labels: Sequence[str]) -> Gauge:
    """Kueue's gauge ``name`` with its ``labels`` and, last, ``replica_role`` (as every family)."""
    return Gauge(name, help_text, [*labels, "replica_role"])


def _counter(name: str, help_text: str, labels: Sequence[str]) -> Counter:
    return Counter(name, help_text, [*labels, "replica_role"])


def _per_resource(name: str, help_text: str, labels: Sequence[str]) -> Gauge:
    return _gauge(name, help_text, [*labels, "flavor", "resource"])


def _exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets``: 1, then 2.5 doubling ``count - 1`` times."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


@dataclass(frozen=True)
class _QueueGauges:
    """Kueue's gauges that a ClusterQueue and a LocalQueue both have: their workloads by state,
    and the quota those hold per flavor and resource."""

    pending: Gauge
    reserving_active: Gauge
    admitted_active: Gauge
    resource_reservation: Gauge
    resource_usage: Gauge

    def observe_workloads(
        self, queue: Sequence[str], *, active: int, inadmissible: int, reserving: int, admitted: int
    ) -> None:
        """``active`` and ``inadmissible``: the pending workloads in Kueue's two states."""
        self.pending.labels(*queue, "active", REPLICA_ROLE).set(active)
        self.pending.labels(*queue, "inadmissible", REPLICA_ROLE).set(inadmissible)
        self.reserving_active.labels(*queue, REPLICA_ROLE).set(reserving)
        self.admitted_active.labels(*queue, REPLICA_ROLE).set(admitted)

    def observe_held(self, quota: Sequence[str], amount: float) -> None:
        """``quota``: the queue's resource labels, then flavor and resource."""
        # Quota is held until the pods that used it are gone: what is reserved is in use.
        self.resource_reservation.labels(*quota, REPLICA_ROLE).set(amount)
        self.resource_usage.labels(*quota, REPLICA_ROLE).set(amount)


def _queue_gauges(
    scope: str, *, prefix: str, quota_prefix: str, labels: list[str], quota_labels: list[str], pending: str
) -> _QueueGauges:
    """The families named ``prefix``/``quota_prefix`` + Kueue's suffix, with the queue's ``labels``
    (``quota_labels`` on the quota families). ``pending``: what the two pending states mean."""
    return _QueueGauges(
        _gauge(
            f"{prefix}pending_workloads", f"Pending workloads per {scope}: {pending}", [*labels, "status"]
        ),
        _gauge(
            f"{prefix}reserving_active_workloads",
            f"Workloads holding a quota reservation, per {scope}",
            labels,
        ),
        _gauge(
            f"{prefix}admitted_active_workloads",
            f"Admitted workloads (reservation and every admission check Ready), per {scope}",
            labels,
        ),
        _per_resource(
            f"{quota_prefix}resource_reservation", f"Quota reserved by the {scope}'s workloads", quota_labels
        ),
        _per_resource(
            f"{quota_prefix}resource_usage", f"Quota used by the {scope}'s admitted workloads", quota_labels
        ),
    )


ADMISSION_ATTEMPTS = _counter(
    "kueue_admission_attempts_total",
    "Admission cycles: 'success' when one admitted at least one workload, else 'inadmissible'",
    ["result"],
)
ADMISSION_ATTEMPT_DURATION = Histogram(
    "kueue_admission_attempt_duration_seconds",
    "Time one admission cycle took, by its result",
    ["result", "replica_role"],
)
_CQ = ["cluster_queue"]
_CQ_QUOTA = ["cohort", *_CQ]
CLUSTER_QUEUE_GAUGES = _queue_gauges(
    "ClusterQueue",
    prefix="kueue_",
    quota_prefix="kueue_cluster_queue_",
    labels=_CQ,
    quota_labels=_CQ_QUOTA,
    pending="'active' (in the admission queue) or 'inadmissible' (parked until something that could "
    "let them fit changes)",
)
CLUSTER_QUEUE_STATUS = _gauge(
    "kueue_cluster_queue_status",
    "1 for the ClusterQueue's status: 'pending' (inactive), 'active' or 'terminating'",
    [*_CQ, "status"],
)
NOMINAL_QUOTA = _per_resource("kueue_cluster_queue_nominal_quota", "Nominal quota", _CQ_QUOTA)
BORROWING_LIMIT = _per_resource(
    "kueue_cluster_queue_borrowing_limit", "Borrowing limit (+Inf when unlimited)", _CQ_QUOTA
)
LENDING_LIMIT = _per_resource(
    "kueue_cluster_queue_lending_limit", "Lending limit (+Inf when unlimited)", _CQ_QUOTA
)
CLUSTER_QUEUE_WEIGHTED_SHARE = _gauge(
    "kueue_cluster_queue_weighted_share",
    "The ClusterQueue's share of what its cohort lends (largest over resources) over its weight",
    [*_CQ, "cohort"],
)
COHORT_WEIGHTED_SHARE = _gauge(
    "kueue_cohort_weighted_share",
    "The Cohort's share of what its parent lends (largest over resources) over its weight",
    ["cohort"],
)

# Per LocalQueue (Kueue exports these behind its LocalQueueMetrics gate; its label ``name`` is the
# LocalQueue's name).
_LQ = ["name", "namespace"]
LOCAL_QUEUE_GAUGES = _queue_gauges(
    "LocalQueue",
    prefix="kueue_local_queue_",
    quota_prefix="kueue_local_queue_",
    labels=_LQ,
    quota_labels=_LQ,
    pending="'active' (not judged by a cycle yet) or 'inadmissible' (a cycle did not admit them; "
    "they carry a pending reason)",
)
LOCAL_QUEUE_STATUS = _gauge(
    "kueue_local_queue_status",
    "1 for the LocalQueue's Active condition status: 'True', 'False' or 'Unknown'",
    [*_LQ, "active"],
)
LOCAL_QUEUE_AFS_USAGE = _gauge(
    "kueue_local_queue_admission_fair_sharing_usage",
    "The LocalQueue's decayed, resource-weighted usage over its weight (admission fair sharing)",
    [*_LQ, "cluster_queue"],
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


def _admission_families(
    prefix: str, scope: str, labels: list[str], admission_buckets: int
) -> _AdmissionFamilies:
    """``prefix``: ``kueue_`` or ``kueue_local_queue_``; Kueue gives the ClusterQueue's admission
    wait 16 buckets and every other wait 14."""
    by_class = [*labels, "priority_class"]
    return _AdmissionFamilies(
        _counter(
            f"{prefix}quota_reserved_workloads_total",
            f"Quota reservations of workloads, per {scope}",
            by_class,
        ),
        _counter(f"{prefix}admitted_workloads_total", f"Admissions of workloads, per {scope}", by_class),
        Histogram(
            f"{prefix}quota_reserved_wait_time_seconds",
            f"From the Workload's creation to its quota reservation, per {scope}",
            [*by_class, "replica_role"],
            buckets=_exponential_buckets(14),
        ),
        Histogram(
            f"{prefix}admission_wait_time_seconds",
            f"From the Workload's creation to its admission, per {scope}",
            [*by_class, "replica_role"],
            buckets=_exponential_buckets(admission_buckets),
        ),
    )


CLUSTER_QUEUE_ADMISSIONS = _admission_families("kueue_", "ClusterQueue", _CQ, 16)
LOCAL_QUEUE_ADMISSIONS = _admission_families("kueue_local_queue_", "LocalQueue", _LQ, 14)
EVICTED = _counter(
    "kueue_evicted_workloads_total",
    "Evictions, per ClusterQueue and Kueue's reason (Preempted, PodsReadyTimeout, AdmissionCheck, "
    "ClusterQueueStopped, Deactivated)",
    [*_CQ, "reason", "underlying_cause", "priority_class"],
)
LOCAL_QUEUE_EVICTED = _counter(
    "kueue_local_queue_evicted_workloads_total",
    "Evictions per LocalQueue and Kueue's reason (as kueue_evicted_workloads_total)",
    [*_LQ, "reason", "underlying_cause", "priority_class"],
)
PREEMPTED = _counter(
    "kueue_preempted_workloads_total",
    "Workloads preempted, per preempting ClusterQueue and reason (InClusterQueue, "
    "InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)",
    ["preempting_cluster_queue", "reason"],
)
REPLACED_SLICES = _counter(
    "kueue_replaced_workload_slices_total",
    "Workload slices replaced by their successor's admission, per ClusterQueue",
    _CQ,
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
        CLUSTER_QUEUE_GAUGES.observe_workloads(
            (node.name,),
            active=status.pending_active,
            inadmissible=status.pending_inadmissible,
            reserving=status.admitted,
            admitted=status.admitted - status.awaiting_checks,
        )
        cohort = node.parent or ""
        for (flavor, resource), (nominal, borrowing, lending) in node.quota.items():
            quota = (cohort, node.name, flavor, resource)
            NOMINAL_QUOTA.labels(*quota, REPLICA_ROLE).set(_amount(nominal))
            BORROWING_LIMIT.labels(*quota, REPLICA_ROLE).set(_amount(borrowing))
            LENDING_LIMIT.labels(*quota, REPLICA_ROLE).set(_amount(lending))
            CLUSTER_QUEUE_GAUGES.observe_held(quota, _amount(status.usage.get((flavor, resource), 0)))


def observe_local_queue(
    namespace: str, name: str, status: Mapping[str, Any], pending_inadmissible: int, active: bool
) -> None:
    """Gauges of one LocalQueue from the status just computed for it (rayquota.io's shape:
    counts, and ``flavorsReservation[].resources[].total``) and how many of its pending
    workloads a cycle already judged (:func:`judged_pending`)."""
    pending = int(status.get("pendingWorkloads") or 0)
    LOCAL_QUEUE_GAUGES.observe_workloads(
        (name, namespace),
        active=pending - pending_inadmissible,
        inadmissible=pending_inadmissible,
        reserving=int(status.get("reservingWorkloads") or 0),
        admitted=int(status.get("admittedWorkloads") or 0),
    )
    for value in ("True", "False", "Unknown"):
        on = value == ("True" if active else "False")
        LOCAL_QUEUE_STATUS.labels(name, namespace, value, REPLICA_ROLE).set(1 if on else 0)
    for flavor in status.get("flavorsReservation") or []:
        for resource in flavor.get("resources") or []:
            amount = parse_quantity(str(resource.get("total") or "0")) / 1000
            LOCAL_QUEUE_GAUGES.observe_held(
                (name, namespace, str(flavor["name"]), str(resource["name"])), amount
            )


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
