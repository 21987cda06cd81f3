"""Admission checks in the engine: reservation, Ready, Retry with backoff, Rejected, inactive queues."""

from __future__ import annotations

from rayquota.queueing import (
    AdmissionCheck,
    AdmissionCheckRule,
    Admit,
    CheckState,
    ClusterQueue,
    Engine,
    PreemptionReason,
    retry_backoff_s,
)
from rayquota.queueing.admission_checks import CHECK_INACTIVE, CHECK_NOT_FOUND

from .builders import engine_with_flavors, gpu_group, gpus, queue, used
from .test_examples import admitted, pending, preempts

MANUAL = "rayquota.io/manual"


def _engine(*rules: AdmissionCheckRule, checks: tuple[str, ...] = ("check",)) -> Engine:
    e = engine_with_flavors("h100", "a100")
    for name in checks:
        e.upsert_admission_check(AdmissionCheck(name, MANUAL))
    queue(
        e,
        ClusterQueue(
            "a", gpu_group(("h100", 4, None, None), ("a100", 4, None, None)), admission_checks=rules
        ),
    )
    return e


def test_reservation_holds_quota_until_every_check_is_ready() -> None:
    e = _engine(AdmissionCheckRule("check"), AdmissionCheckRule("other"), checks=("check", "other"))
    e.add_workload(gpus("a", "job", 3))
    (decision,) = e.run_cycle()
    assert isinstance(decision, Admit) and decision.admission_checks == ("check", "other")
    status = e.workload("a/job")
    assert status is not None and not status.checks_ready
    assert status.admission_checks == {"check": CheckState.PENDING, "other": CheckState.PENDING}
    assert used(e, "a") == 3  # charged while the checks are pending
    assert e.cluster_queue_status("a").awaiting_checks == 1
    # Only 1 h100 GPU is left beside the reservation: a second job goes to the next flavor.
    e.add_workload(gpus("a", "second", 2, created=1))
    (second,) = e.run_cycle()
    assert isinstance(second, Admit) and second.pod_sets[0].flavors == {"nvidia.com/gpu": "a100"}
    e.set_admission_check_state("a/job", "check", CheckState.READY)
    assert not e.workload("a/job").checks_ready  # type: ignore[union-attr]
    e.set_admission_check_state("a/job", "other", CheckState.READY)
    assert e.workload("a/job").checks_ready  # type: ignore[union-attr]
    assert e.cluster_queue_status("a").awaiting_checks == 1  # the second job's checks
    assert used(e, "a") == 3


def test_without_checks_a_reservation_is_an_admission() -> None:
    e = _engine()
    e.add_workload(gpus("a", "job", 1))
    (decision,) = e.run_cycle()
    assert isinstance(decision, Admit) and decision.admission_checks == ()
    assert e.workload("a/job").checks_ready  # type: ignore[union-attr]


def test_checks_on_flavors_apply_only_to_workloads_given_those_flavors() -> None:
    e = _engine(AdmissionCheckRule("check", on_flavors=("a100",)))
    e.add_workload(gpus("a", "on-h100", 4))
    e.add_workload(gpus("a", "on-a100", 4, created=1))
    decisions = {d.workload: d for d in e.run_cycle() if isinstance(d, Admit)}
    assert decisions["a/on-h100"].admission_checks == ()
    assert decisions["a/on-a100"].admission_checks == ("check",)


def test_retry_releases_the_reservation_and_requeues_after_the_backoff() -> None:
    e = _engine(AdmissionCheckRule("check"))
    e.add_workload(gpus("a", "job", 4))
    assert admitted(e.run_cycle(now=100.0)) == ["a/job"]
    e.set_admission_check_state("a/job", "check", CheckState.RETRY, message="no capacity", requeue_at=160.0)
    (evict,) = preempts(e.run_cycle(now=101.0))
    assert evict.victims == ("a/job",) and evict.kind is PreemptionReason.ADMISSION_CHECK
    assert "AdmissionCheck in Retry state: check (no capacity)" in evict.reason
    assert used(e, "a") == 4  # held until the operator says no pod holds it
    e.release("a/job")
    assert used(e, "a") == 0
    assert e.admission_check_states("a/job") == {}  # states start afresh at the next reservation
    # Another workload takes the freed quota while the retried one backs off.
    e.add_workload(gpus("a", "other", 4, created=1))
    decisions = e.run_cycle(now=102.0)
    assert admitted(decisions) == ["a/other"]
    assert e.next_requeue_at() == 160.0
    e.delete_workload("a/other")
    assert admitted(e.run_cycle(now=150.0)) == []  # still backing off
    decisions = e.run_cycle(now=160.0)
    assert [d.admission_checks for d in decisions if isinstance(d, Admit)] == [("check",)]
    assert e.admission_check_states("a/job") == {"check": CheckState.PENDING}


def test_rejected_deactivates_the_workload() -> None:
    e = _engine(AdmissionCheckRule("check"))
    e.add_workload(gpus("a", "job", 4))
    e.run_cycle()
    e.set_admission_check_state("a/job", "check", CheckState.REJECTED, message="never fits")
    (evict,) = preempts(e.run_cycle())
    assert evict.kind is PreemptionReason.ADMISSION_CHECK_REJECTED
    assert evict.reason == "Deactivated due to AdmissionCheck in Rejected state: check (never fits)"
    e.release("a/job")
    assert used(e, "a") == 0
    decisions = e.run_cycle(now=10_000.0)
    assert admitted(decisions) == []
    assert e.workload("a/job").pending_reason == "workload a/job is inactive"  # type: ignore[union-attr]


def test_rejected_wins_over_retry_and_unknown_checks_are_ignored() -> None:
    e = _engine(AdmissionCheckRule("check"), AdmissionCheckRule("other"), checks=("check", "other"))
    e.add_workload(gpus("a", "job", 1))
    e.run_cycle()
    e.set_admission_check_state("a/job", "not-on-the-queue", CheckState.REJECTED)
    e.set_admission_check_state("a/nobody", "check", CheckState.REJECTED)
    assert preempts(e.run_cycle()) == []
    e.set_admission_check_state("a/job", "check", CheckState.RETRY)
    e.set_admission_check_state("a/job", "other", CheckState.REJECTED)  # already being evicted: ignored
    (evict,) = preempts(e.run_cycle())
    assert evict.kind is PreemptionReason.ADMISSION_CHECK


def test_missing_or_inactive_check_makes_the_queue_inactive() -> None:
    e = _engine(AdmissionCheckRule("check"), checks=())
    e.add_workload(gpus("a", "job", 1))
    reason = pending(e.run_cycle())["a/job"]
    assert reason == (
        "ClusterQueue a is inactive (AdmissionCheckNotFound): "
        "Can't admit new workloads: AdmissionCheck check not found"
    )
    problem = e.cluster_queue_status("a").check_problem
    assert problem is not None and problem.reason == CHECK_NOT_FOUND
    e.upsert_admission_check(AdmissionCheck("check", MANUAL, active=False, message="controller is down"))
    assert "AdmissionCheck check is inactive: controller is down" in pending(e.run_cycle())["a/job"]
    assert e.cluster_queue_status("a").check_problem.reason == CHECK_INACTIVE  # type: ignore[union-attr]
    e.upsert_admission_check(AdmissionCheck("check", MANUAL))
    assert admitted(e.run_cycle()) == ["a/job"]
    assert e.cluster_queue_status("a").check_problem is None


def test_restored_reservation_keeps_its_recorded_check_states() -> None:
    e = _engine(AdmissionCheckRule("check"))
    e.add_workload(gpus("a", "job", 2))
    (decision,) = e.run_cycle()
    assert isinstance(decision, Admit)
    restarted = _engine(AdmissionCheckRule("check"))
    restarted.restore_admission(
        gpus("a", "job", 2), "a", decision.pod_sets, admission_checks={"check": CheckState.READY}
    )
    assert restarted.workload("a/job").checks_ready  # type: ignore[union-attr]
    fresh = _engine(AdmissionCheckRule("check"))
    fresh.restore_admission(gpus("a", "job", 2), "a", decision.pod_sets)
    assert fresh.admission_check_states("a/job") == {"check": CheckState.PENDING}


def test_retry_backoff_doubles_up_to_the_maximum() -> None:
    assert [retry_backoff_s(n) for n in (0, 1, 2, 3)] == [0, 60, 120, 240]
    assert retry_backoff_s(50) == 3600
    assert retry_backoff_s(3, base_s=1, max_s=3) == 3
