"""The operator's side of admission checks, without a cluster: the Workload's admissionChecks
list, its Admitted condition, the gate's reading, the manual controller's annotation, the
converter, and the ClusterQueue's Active condition."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue.admission import check_states, converter
from rayquota.operator.queue.admission.check_states import UNSATISFIED_CHECKS
from rayquota.operator.queue.admission.driver import AdmittedSlice, Eviction
from rayquota.operator.queue.admission.manual_check import STATE_ANNOTATION_PREFIX, decided_entries
from rayquota.operator.queue.admission.workload_status import desired_status
from rayquota.operator.queue.gating.gate import recorded_admission
from rayquota.operator.queue.kueue.kueue_shapes import workload_status_to_kueue
from rayquota.operator.queue.status import cluster_queue_status
from rayquota.queueing import (
    AdmissionCheckRule,
    CheckProblem,
    CheckState,
    ClusterQueueStatus,
    PodSetAssignment,
)

NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-02T03:05:05Z"
GPU = "nvidia.com/gpu"
RESERVED = AdmittedSlice(
    "team",
    (PodSetAssignment("workers", 2, {GPU: "h100"}, {GPU: 2000}),),
    {("h100", GPU): 2000},
    ("approval",),
)


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def _reserved_status() -> dict[str, Any]:
    return desired_status(
        None, admission=RESERVED, eviction=None, pending_reason=None, finished=False, now=NOW
    )


def test_reservation_lists_each_check_pending_and_is_not_admitted() -> None:
    status = _reserved_status()
    assert status["admissionChecks"] == [
        {"name": "approval", "state": "Pending", "lastTransitionTime": NOW, "message": ""}
    ]
    assert _condition(status, "QuotaReserved")["status"] == "True"
    admitted = _condition(status, "Admitted")
    assert admitted["status"] == "False" and admitted["reason"] == UNSATISFIED_CHECKS
    assert admitted["message"] == "waiting for AdmissionCheck approval"
    # Kueue-API mode writes the same reason (not NoReservation: the quota is reserved).
    kueue = workload_status_to_kueue(status)
    assert _condition(kueue, "Admitted")["reason"] == UNSATISFIED_CHECKS
    assert kueue["admissionChecks"] == status["admissionChecks"]


def test_ready_check_admits_and_keeps_its_entry() -> None:
    previous = _reserved_status()
    previous["admissionChecks"][0].update(state="Ready", lastTransitionTime=LATER)
    status = desired_status(
        previous, admission=RESERVED, eviction=None, pending_reason=None, finished=False, now=LATER
    )
    assert status["admissionChecks"][0]["state"] == "Ready"
    assert _condition(status, "Admitted")["status"] == "True"


def test_gate_reads_a_reservation_with_a_pending_check_as_no_admission() -> None:
    workload = {"metadata": {"name": "w"}, "status": _reserved_status()}
    assert recorded_admission(workload) is None
    workload["status"]["admissionChecks"][0]["state"] = "Ready"
    admission = recorded_admission(workload)
    assert admission is not None and admission.cluster_queue == "team"


def test_released_reservation_resets_checks_to_pending_but_keeps_rejected() -> None:
    previous = _reserved_status()
    previous["admissionChecks"] = [
        {
            "name": "a",
            "state": "Retry",
            "lastTransitionTime": NOW,
            "retryCount": 1,
            "requeueAfterSeconds": 60,
        },
        {"name": "b", "state": "Rejected", "lastTransitionTime": NOW, "message": "no"},
    ]
    status = desired_status(
        previous, admission=None, eviction=None, pending_reason="x", finished=False, now=LATER
    )
    a, b = status["admissionChecks"]
    assert a == {"name": "a", "state": "Pending", "lastTransitionTime": LATER, "retryCount": 1, "message": ""}
    assert b["state"] == "Rejected"


def test_recorded_states_turn_retry_after_into_a_moment() -> None:
    workload = {
        "status": {
            "admissionChecks": [
                {
                    "name": "a",
                    "state": "Retry",
                    "lastTransitionTime": NOW,
                    "requeueAfterSeconds": 60,
                    "message": "m",
                },
                {"name": "b", "state": "Bogus", "lastTransitionTime": NOW},
            ]
        }
    }
    ((name, (state, message, at)),) = check_states.recorded_states(workload).items()
    assert (name, state, message) == ("a", CheckState.RETRY, "m")
    assert at == 1767323045.0 + 60


def test_manual_annotation_decides_a_pending_manual_check_only() -> None:
    workload: dict[str, Any] = {
        "metadata": {
            "annotations": {
                STATE_ANNOTATION_PREFIX + "approval": "Retry",
                STATE_ANNOTATION_PREFIX + "other": "Ready",
            }
        },
        "status": {
            "admission": {"clusterQueue": "team"},
            "admissionChecks": [
                {"name": "approval", "state": "Pending", "lastTransitionTime": NOW},
                {"name": "other", "state": "Pending", "lastTransitionTime": NOW},
            ],
        },
    }
    decided = decided_entries(workload, {"approval"}, LATER)  # "other" is not a manual check
    assert decided is not None
    entries, consumed = decided
    assert entries[0]["state"] == "Retry" and entries[0]["retryCount"] == 1
    assert entries[0]["requeueAfterSeconds"] == 60
    assert entries[1]["state"] == "Pending"
    assert consumed == [STATE_ANNOTATION_PREFIX + "approval"]
    workload["status"]["admissionChecks"] = entries
    # Applied, its annotation not removed yet: consumed again, nothing decided anew.
    assert decided_entries(workload, {"approval"}, LATER) == (entries, consumed)
    del workload["metadata"]["annotations"][STATE_ANNOTATION_PREFIX + "approval"]
    assert decided_entries(workload, {"approval"}, LATER) is None  # only Pending entries are decided


def test_manual_annotation_waits_while_the_workload_holds_no_reservation() -> None:
    """Released (an approved workload preempted, or another check's Retry): the reconciler sets
    the entries Pending again. Were the Ready annotation applied then, each would undo the
    other's write for ever; it is applied at the next reservation."""
    previous = _reserved_status()
    previous["admissionChecks"][0].update(state="Ready", lastTransitionTime=LATER)
    released = desired_status(
        previous, admission=None, eviction=None, pending_reason="waiting", finished=False, now=LATER
    )
    assert released["admissionChecks"][0]["state"] == "Pending"
    annotations = {STATE_ANNOTATION_PREFIX + "approval": "Ready"}
    workload: dict[str, Any] = {"metadata": {"annotations": annotations}, "status": released}
    assert decided_entries(workload, {"approval"}, LATER) is None
    evicting = desired_status(
        _reserved_status(),
        admission=None,
        eviction=Eviction("preempted", "InClusterQueue", None),
        pending_reason=None,
        finished=False,
        now=LATER,
    )
    workload["status"] = evicting
    assert decided_entries(workload, {"approval"}, LATER) is None  # its entries are reset next
    workload["status"] = _reserved_status()
    decided = decided_entries(workload, {"approval"}, LATER)
    assert decided is not None and decided[0][0]["state"] == "Ready" and decided[1] == []


def test_converter_reads_both_ways_of_listing_checks_and_the_active_condition() -> None:
    spec = {"admissionChecksStrategy": {"admissionChecks": [{"name": "p", "onFlavors": ["h100"]}]}}
    assert converter.admission_check_rules(spec) == (AdmissionCheckRule("p", ("h100",)),)
    assert converter.admission_check_rules({"admissionChecks": ["a"]}) == (AdmissionCheckRule("a"),)
    body: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"controllerName": "x"}}
    check = converter.admission_check(body)
    assert not check.active and check.message == "no controller has marked it Active"
    body["status"] = {"conditions": [{"type": "Active", "status": "True", "message": "ok"}]}
    assert converter.admission_check(body).active


def test_cluster_queue_with_a_missing_check_is_inactive_with_the_reason() -> None:
    problem = CheckProblem("AdmissionCheckNotFound", "Can't admit new workloads: AdmissionCheck p not found")
    status = ClusterQueueStatus("team", 0, 2, {}, {}, None, check_problem=problem, awaiting_checks=1)
    written = cluster_queue_status(None, status, (), NOW)
    active = next(c for c in written["conditions"] if c["type"] == "Active")
    assert (active["status"], active["reason"]) == ("False", "AdmissionCheckNotFound")
    assert written["reservingWorkloads"] == 2 and written["admittedWorkloads"] == 1
