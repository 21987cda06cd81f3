"""A Workload's status from the driver's view: admission, then the conditions Kueue's users
know (QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished), and the pending
reason in words. Pure; the reconciler writes the result with an exact status write."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rayquota.api.queueing_v1alpha1 import WorkloadConditionType as Cond
from rayquota.operator.queue.admission import check_states, converter, requeued
from rayquota.operator.queue.admission.driver import AdmittedSlice, Eviction
from rayquota.operator.queue.admission.pods_ready import PODS_READY, Readiness
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import never_fits

SCALE_UP_WAITING = "scale-up waiting"
MULTIKUEUE_KEYS = ("clusterName", "nominatedClusterNames")
# The words before the engine's first verdict on a Workload.
NOT_YET_EVALUATED = "waiting for the next admission cycle"
"""How an admitted Workload's pending reason starts while its next slice waits."""
# QuotaReserved=False's reason (Kueue's) for a request beyond the queue's maximum capacity.
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"


def is_evicted(workload: Mapping[str, Any]) -> bool:
    """Being evicted: ``Evicted`` is true and the admission is still held (its pods are going).
    Once they are gone the admission is cleared and ``Evicted`` stays true until the workload
    reserves quota again (Kueue's lifecycle; its reason and time order the requeued workload)."""
    return _eviction_under_way(workload) is not None


def recorded_eviction(workload: Mapping[str, Any]) -> Eviction | None:
    """The eviction a Workload's status records (its Evicted condition, the admission still held),
    for a process that did not decide it: without it, the next status write would read as "pods
    gone, quota released" and clear the admission while the pods still run (a leader taking over
    mid-preemption did)."""
    evicted = _eviction_under_way(workload)
    if evicted is None:
        return None
    return Eviction(str(evicted.get("message") or ""), str(evicted.get("reason") or ""), None)


def _eviction_under_way(workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Workload's ``Evicted`` condition while it is being evicted (:func:`is_evicted`)."""
    status = workload.get("status") or {}
    evicted = conditions.find(status.get("conditions"), Cond.EVICTED)
    if not status.get("admission") or evicted is None or evicted.get("status") != "True":
        return None
    return evicted


def is_finished(workload: Mapping[str, Any]) -> bool:
    return conditions.is_true((workload.get("status") or {}).get("conditions"), Cond.FINISHED)


def desired_status(
    previous: Mapping[str, Any] | None,
    *,
    admission: AdmittedSlice | None,
    eviction: Eviction | None,
    pending_reason: str | None,
    finished: bool,
    now: str,
    pods_ready: Readiness | None = None,
    requeue_state: Mapping[str, Any] | None = None,
    active: bool = True,
    running_queues: Collection[str] = (),
) -> dict[str, Any]:
    """``pods_ready``: waitForPodsReady's verdict on an admitted workload; ``requeue_state``:
    a new ``requeueState`` (an eviction for pods not ready in time), else the previous one;
    ``active`` and ``running_queues``: what ends a False ``Requeued`` (:mod:`.requeued`).

    Evicted stays true (reason and time) after the pods are gone, until quota is reserved
    again, as in Kueue: the engine orders a workload evicted for pods not ready in time, or by a
    check, by that time."""
    prev = dict(previous or {})
    conds: list[dict[str, Any]] = [dict(c) for c in prev.get("conditions") or []]
    status: dict[str, Any] = {}
    if finished:
        conds = conditions.set_condition(conds, Cond.FINISHED, True, "Finished", "the job finished", now=now)
    else:
        conds = conditions.remove_condition(conds, Cond.FINISHED)
    if eviction is not None:
        conds = _evicting(status, conds, prev, eviction, now)
    elif admission is not None:
        conds = _admitted(status, conds, prev, admission, pods_ready, pending_reason, now)
    else:
        conds = conditions.remove_condition(conds, PODS_READY)
        state = requeue_state if requeue_state is not None else prev.get("requeueState") or {}
        conds = requeued.requeue_condition(
            conds, requeue_state=state, active=active, running_queues=running_queues, now=now
        )
        if prev.get("admissionChecks"):
            status["admissionChecks"] = check_states.requeued_checks(prev, now)
        if not finished:
            conds = _pending(status, conds, pending_reason, now)
    status["conditions"] = conds
    _carry_over(status, prev, requeue_state)
    return {k: v for k, v in status.items() if v is not None}


def _evicting(
    status: dict[str, Any], conds: list[dict[str, Any]], prev: Mapping[str, Any], eviction: Eviction, now: str
) -> list[dict[str, Any]]:
    """Still holding quota until the pods are gone: keep the admission, say why it goes."""
    status["admission"] = prev.get("admission")
    status["admissionChecks"] = prev.get("admissionChecks")
    conds = conditions.set_condition(conds, Cond.EVICTED, True, eviction.kind, eviction.reason, now=now)
    if eviction.preemptor is not None:
        message = f"{eviction.reason} (preempted by {eviction.preemptor})"
        conds = conditions.set_condition(conds, Cond.PREEMPTED, True, eviction.kind, message, now=now)
    return conds


def _admitted(
    status: dict[str, Any],
    conds: list[dict[str, Any]],
    prev: Mapping[str, Any],
    admission: AdmittedSlice,
    pods_ready: Readiness | None,
    pending_reason: str | None,
    now: str,
) -> list[dict[str, Any]]:
    """The admission and its checks, QuotaReserved, Admitted (once the checks are ready) and
    PodsReady; a pending reason here is a scale-up slice's."""
    status["admission"] = converter.admission_to_api(admission.cluster_queue, admission.pod_sets)
    message = f"Quota reserved in ClusterQueue {admission.cluster_queue}"
    conds = conditions.set_condition(conds, Cond.QUOTA_RESERVED, True, "QuotaReserved", message, now=now)
    if admission.admission_checks:
        status["admissionChecks"] = check_states.reserved_checks(prev, admission.admission_checks, now)
    elif check_states.passed(prev):
        # A scale-up slice is not checked again: the checks the workload passed stay.
        status["admissionChecks"] = prev["admissionChecks"]
    if check_states.status_ready(status):
        admitted = (True, "Admitted", f"The workload is admitted to {admission.cluster_queue}")
    else:
        admitted = (False, check_states.UNSATISFIED_CHECKS, check_states.not_ready_words(status))
    conds = conditions.set_condition(conds, Cond.ADMITTED, *admitted, now=now)
    conds = conditions.remove_condition(conds, Cond.EVICTED)
    conds = conditions.remove_condition(conds, Cond.REQUEUED)
    if pods_ready is not None:
        conds = conditions.set_condition(
            conds, PODS_READY, pods_ready.ready, pods_ready.reason, pods_ready.message, now=now
        )
    if pending_reason:
        status["pendingReason"] = f"{SCALE_UP_WAITING}: {pending_reason}"
    return conds


def _pending(
    status: dict[str, Any], conds: list[dict[str, Any]], pending_reason: str | None, now: str
) -> list[dict[str, Any]]:
    """QuotaReserved and Admitted False with the pending reason, which the status carries too."""
    reason = pending_reason or NOT_YET_EVALUATED
    # Kueue's reason for a request beyond what the queue could ever hold.
    why = EXCEEDS_MAX_QUOTA if never_fits(reason) else "Pending"
    conds = conditions.set_condition(conds, Cond.QUOTA_RESERVED, False, why, reason, now=now)
    conds = conditions.set_condition(conds, Cond.ADMITTED, False, "Pending", reason, now=now)
    status["pendingReason"] = reason
    return conds


def _carry_over(
    status: dict[str, Any], prev: Mapping[str, Any], requeue_state: Mapping[str, Any] | None
) -> None:
    """Fields other controllers wrote that outlive this write (the new requeueState wins)."""
    if status.get("admission"):
        # MultiKueue's choice of worker (its check controller writes it) lasts as long as the
        # reservation: a requeued workload is dispatched afresh.
        for key in MULTIKUEUE_KEYS:
            if prev.get(key):
                status[key] = prev[key]
    for key in ("requeueState", "reclaimablePods"):
        if prev.get(key):
            status[key] = prev[key]
    if requeue_state is not None:
        status["requeueState"] = dict(requeue_state)
