"""A process that takes over (a new leader, a restart) in the middle of an eviction restores it
from the Workload's Evicted condition: its next status write keeps the admission (the victim's
pods still hold the quota) instead of reading as "pods gone, quota released". Without the
recorded reason the new leader cleared the victims' admissions while their pods ran, and then
never freed the quota in its engine (tests/integration/faults/test_leader_kill.py)."""

from __future__ import annotations

from rayquota.operator.queue.admission.workload_status import desired_status, recorded_eviction
from rayquota.queueing import PodSetAssignment
from tests.unit.queue.fakes import GPU, gpu_workload, new_driver

NOW = "2026-11-26T12:00:00Z"
EVICTED = {"type": "Evicted", "status": "True", "reason": "InClusterQueue",
           "message": "preempted to make room for ns/urgent", "lastTransitionTime": NOW}  # fmt: skip
ADMISSION = {"clusterQueue": "a", "podSetAssignments": [{"name": "w2", "count": 1}]}


def test_a_restored_eviction_keeps_the_admission_in_the_next_status_write() -> None:
    driver, _ = new_driver()
    victim = gpu_workload("victim", "a", {"w2": 1})
    previous = {"admission": ADMISSION, "conditions": [EVICTED]}
    eviction = recorded_eviction({"status": previous})
    assert eviction is not None and eviction.kind == "InClusterQueue"
    pod_sets = (PodSetAssignment("w2", 1, {GPU: "f"}, {GPU: 2000}),)
    driver.restore(victim, "a", pod_sets, evicting=True, eviction=eviction)
    assert driver.is_evicting("ns/victim") and driver.eviction("ns/victim") == eviction
    status = desired_status(
        previous,
        admission=driver.admission("ns/victim"),
        eviction=driver.eviction("ns/victim"),
        pending_reason=None,
        finished=False,
        now=NOW,
    )
    assert status["admission"] == ADMISSION  # still held: its pods may run
    assert [c for c in status["conditions"] if c["type"] == "Evicted"] == [EVICTED]


def test_no_eviction_is_read_from_a_workload_that_records_none() -> None:
    assert recorded_eviction({"status": {"conditions": [{**EVICTED, "status": "False"}]}}) is None
    assert recorded_eviction({}) is None
