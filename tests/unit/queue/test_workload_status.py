from __future__ import annotations

import pytest

from rayquota.operator.queue.admission.driver import AdmittedSlice, Eviction
from rayquota.operator.queue.admission.workload_status import desired_status, is_evicted, recorded_eviction
from rayquota.queueing import PodSetAssignment

ADMISSION = AdmittedSlice(
    "team", (PodSetAssignment("gpu", 2, {"nvidia.com/gpu": "a100"}, {"nvidia.com/gpu": 2000}),), {}
)


def conds(status: dict) -> dict[str, tuple[str, str]]:  # type: ignore[type-arg]
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_pending_then_admitted_then_evicted_then_requeued() -> None:
    pending = desired_status(
        None, admission=None, eviction=None, pending_reason="needs 2 gpu", finished=False, now="t1"
    )
    assert pending["pendingReason"] == "needs 2 gpu" and "admission" not in pending
    assert conds(pending)["QuotaReserved"] == ("False", "Pending")

    admitted = desired_status(
        pending, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t2"
    )
    assert admitted["admission"]["clusterQueue"] == "team"
    assert conds(admitted)["Admitted"] == ("True", "Admitted") and "pendingReason" not in admitted

    eviction = Eviction("preempted to admit ns/high", "InClusterQueue", "ns/high")
    evicted = desired_status(
        admitted, admission=None, eviction=eviction, pending_reason=None, finished=False, now="t3"
    )
    assert evicted["admission"] == admitted["admission"]  # held until the pods are gone
    assert conds(evicted)["Evicted"] == ("True", "InClusterQueue")
    assert "ns/high" in next(c["message"] for c in evicted["conditions"] if c["type"] == "Preempted")

    requeued = desired_status(
        evicted, admission=None, eviction=None, pending_reason="waiting", finished=False, now="t4"
    )
    assert "admission" not in requeued
    # Evicted stays true, with the eviction's reason and time, until quota is reserved again.
    assert (
        conds(requeued)["Evicted"] == ("True", "InClusterQueue") and conds(requeued)["Requeued"][0] == "True"
    )
    assert next(c for c in requeued["conditions"] if c["type"] == "Evicted")["lastTransitionTime"] == "t3"
    assert not is_evicted({"status": requeued}) and recorded_eviction({"status": requeued}) is None

    waiting = desired_status(
        requeued, admission=None, eviction=None, pending_reason="still waiting", finished=False, now="t5"
    )
    assert next(c for c in waiting["conditions"] if c["type"] == "Evicted")["lastTransitionTime"] == "t3"

    readmitted = desired_status(
        waiting, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t6"
    )
    assert "Evicted" not in conds(readmitted) and "Requeued" not in conds(readmitted)


def test_an_admission_cleared_by_another_writer_requeues_the_evicted_workload() -> None:
    """Kueue-API mode: Kueue's job runner clears a preempted Workload's admission itself; the next
    status this operator writes finds no admission to clear and must still say Requeued (the
    integration test test_preempted_workload_holds_its_quota_until_its_admission_is_cleared)."""
    admitted = desired_status(
        None, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t1"
    )
    eviction = Eviction("preempted to admit ns/high", "InClusterQueue", "ns/high")
    evicted = desired_status(
        admitted, admission=None, eviction=eviction, pending_reason=None, finished=False, now="t2"
    )
    cleared_elsewhere = {k: v for k, v in evicted.items() if k != "admission"}
    requeued = desired_status(
        cleared_elsewhere, admission=None, eviction=None, pending_reason="waiting", finished=False, now="t3"
    )
    assert conds(requeued)["Requeued"] == ("True", "Preempted")  # Kueue's Evicted reason
    assert conds(requeued)["Evicted"] == ("True", "InClusterQueue")
    again = desired_status(
        requeued, admission=None, eviction=None, pending_reason="waiting", finished=False, now="t4"
    )
    assert again == requeued  # told once


def test_transition_time_moves_only_with_the_status() -> None:
    first = desired_status(
        None, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t1"
    )
    again = desired_status(
        first, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t9"
    )
    assert again == first  # nothing to write at rest


def test_scale_up_waiting_is_reported_beside_the_admission() -> None:
    status = desired_status(
        None, admission=ADMISSION, eviction=None, pending_reason="needs 2 more gpu", finished=False, now="t1"
    )
    assert status["admission"] and status["pendingReason"] == "scale-up waiting: needs 2 more gpu"


def test_finished_is_set_and_cleared() -> None:
    done = desired_status(None, admission=None, eviction=None, pending_reason=None, finished=True, now="t1")
    assert conds(done)["Finished"][0] == "True"
    again = desired_status(done, admission=None, eviction=None, pending_reason="x", finished=False, now="t2")
    assert "Finished" not in conds(again)


def test_a_request_beyond_the_maximum_capacity_has_kueues_reason() -> None:
    reason = "can never be admitted: insufficient quota for nvidia.com/gpu in flavor a100, ..."
    status = desired_status(
        None, admission=None, eviction=None, pending_reason=reason, finished=False, now="t1"
    )
    assert conds(status)["QuotaReserved"] == ("False", "ExceedsMaxQuota")
    assert status["pendingReason"] == reason


# --- Requeued after the quota is released, as Kueue writes it --------------------------------

EVICTED_AT = "2026-01-01T00:00:00Z"
RELEASED_AT = "2026-01-01T00:00:30Z"
BACKOFF_OVER = "2026-01-01T00:01:01Z"
BACKOFF = {"count": 1, "requeueAt": "2026-01-01T00:01:00Z"}


def _released(kind: str, requeue_state: dict | None = None, **held: object) -> dict:  # type: ignore[type-arg]
    """A workload evicted with reason ``kind`` whose pods are gone: the status written then."""
    admitted = desired_status(
        None, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now="t0"
    )
    evicted = desired_status(
        admitted,
        admission=None,
        eviction=Eviction(f"evicted for {kind}", kind, None),
        pending_reason=None,
        finished=False,
        now=EVICTED_AT,
        requeue_state=requeue_state,
    )
    return _later(evicted, RELEASED_AT, **held)


def _later(previous: dict, now: str, **held: object) -> dict:  # type: ignore[type-arg]
    return desired_status(
        previous, admission=None, eviction=None, pending_reason="waiting", finished=False, now=now, **held
    )  # type: ignore[arg-type]


def _requeued(status: dict) -> tuple[str, str, str]:  # type: ignore[type-arg]
    found = next(c for c in status["conditions"] if c["type"] == "Requeued")
    return found["status"], found["reason"], found["message"]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("InClusterQueue", "Preempted"),
        ("InCohortReclamation", "Preempted"),
        ("InCohortFairSharing", "Preempted"),
        ("Preempted", "Preempted"),  # Kueue-API mode: Kueue's own Evicted reason
        ("NodeFailures", "NodeFailures"),
    ],
)
def test_a_preempted_workload_is_requeued_at_once_with_the_eviction_reason_and_message(
    kind: str, reason: str
) -> None:
    released = _released(kind)
    assert _requeued(released) == ("True", reason, f"evicted for {kind}")
    assert _later(released, BACKOFF_OVER) == released  # told once


@pytest.mark.parametrize("kind", ["PodsReadyTimeout", "AdmissionCheck"])
def test_a_backoff_eviction_is_requeued_false_until_requeue_at_then_backoff_finished(kind: str) -> None:
    released = _released(kind, BACKOFF)
    assert _requeued(released) == ("False", kind, f"evicted for {kind}")
    assert _later(released, "2026-01-01T00:00:59Z") == released  # still backing off: no write
    inactive = _later(released, BACKOFF_OVER, active=False)
    assert _requeued(inactive)[:2] == ("False", kind)  # Kueue ends a backoff of active ones only
    back = _later(released, BACKOFF_OVER)
    assert _requeued(back) == ("True", "BackoffFinished", "The workload backoff was finished")
    assert _later(back, "2026-01-01T00:02:00Z") == back


@pytest.mark.parametrize("kind", ["PodsReadyTimeout", "AdmissionCheck"])
def test_a_backoff_eviction_without_requeue_at_is_backoff_finished_at_once(kind: str) -> None:
    """Kueue writes False, then True in its next pass; the end state is written in one here."""
    released = _released(kind)
    assert _requeued(released)[:2] == ("True", "BackoffFinished")
    assert next(c for c in released["conditions"] if c["type"] == "Requeued")["lastTransitionTime"] == (
        RELEASED_AT
    )


@pytest.mark.parametrize("kind", ["WorkloadDeactivated", "DeactivatedDueToAdmissionCheck", "Deactivated"])
def test_a_deactivated_workload_is_requeued_once_reactivated(kind: str) -> None:
    released = _released(kind, active=False)
    assert _requeued(released) == ("False", "Deactivated", f"evicted for {kind}")
    assert _later(released, BACKOFF_OVER, active=False) == released
    reactivated = _later(released, BACKOFF_OVER, active=True)
    assert _requeued(reactivated) == ("True", "Reactivated", "The workload was reactivated")


@pytest.mark.parametrize(
    ("kind", "queue", "other", "restarted"),
    [
        ("ClusterQueueStopped", "ClusterQueue", "LocalQueue", "ClusterQueueRestarted"),
        ("LocalQueueStopped", "LocalQueue", "ClusterQueue", "LocalQueueRestarted"),
    ],
)
def test_a_stopped_queues_workload_is_requeued_once_that_queue_runs(
    kind: str, queue: str, other: str, restarted: str
) -> None:
    released = _released(kind, running_queues=frozenset({other}))
    assert _requeued(released) == ("False", kind, f"evicted for {kind}")
    assert _later(released, BACKOFF_OVER, running_queues=frozenset({other})) == released
    running = _later(released, BACKOFF_OVER, running_queues=frozenset({queue, other}))
    message = f"The {queue} was restarted after being stopped"
    assert _requeued(running) == ("True", restarted, message)


def test_a_requeued_false_for_another_reason_stays_until_quota_is_reserved() -> None:
    released = _released(
        "MaximumExecutionTimeExceeded", running_queues=frozenset({"LocalQueue", "ClusterQueue"})
    )
    assert _requeued(released)[:2] == ("False", "MaximumExecutionTimeExceeded")
    assert (
        _later(released, BACKOFF_OVER, running_queues=frozenset({"LocalQueue", "ClusterQueue"})) == released
    )
    readmitted = desired_status(
        released, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now=BACKOFF_OVER
    )
    assert "Requeued" not in conds(readmitted)
