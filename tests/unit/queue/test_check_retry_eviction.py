"""A check's Retry of a reservation no pod ever held, through the workload reconciler's eviction
step: the Workload says ``Evicted=True`` (reason ``AdmissionCheck``, the eviction's time) before
its quota goes back, and keeps saying so while it waits, so that it queues again by that time
(Kueue's queue order timestamp) behind a workload created before the eviction; the condition
goes at the next reservation. The requeue backoff a check asks for is written beside it."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.timestamps import format_rfc3339, now_rfc3339, parse_rfc3339
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.driver import ConfigObject, Driver
from rayquota.operator.queue.admission.manual_check import STATE_ANNOTATION_PREFIX, decided_entries
from rayquota.operator.queue.kueue.api_group import RAYQUOTA
from rayquota.operator.queue.workloads.check_outcomes import RETRY_EVENT
from rayquota.queueing import (
    AdmissionCheck,
    AdmissionCheckRule,
    Admit,
    ClusterQueue,
    Engine,
    FlavorQuotas,
    LocalQueue,
    Preempt,
    PreemptionReason,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WorkloadEviction,
)
from tests.unit.queue.fakes import RecordingWriter
from tests.unit.queue.reconciler_harness import NAMESPACE, Harness, harness, rayjob

CHECK = "approval"
MANUAL = "rayquota.io/manual"


def _config() -> list[ConfigObject]:
    """One ClusterQueue, strict FIFO, room for one 1-cpu workload, every reservation checked."""
    quota = FlavorQuotas("default", {"cpu": ResourceQuota.of(1)})
    queue = ClusterQueue(
        "cq",
        resource_groups=(ResourceGroup(("cpu",), (quota,)),),
        queueing_strategy=QueueingStrategy.STRICT_FIFO,
        admission_checks=(AdmissionCheckRule(CHECK),),
    )
    return [
        AdmissionCheck(CHECK, MANUAL),
        ResourceFlavor("default"),
        queue,
        LocalQueue(NAMESPACE, "team-a", "cq"),
    ]


def _driver() -> Driver:
    driver = Driver(Engine(), RecordingWriter())
    for obj in _config():
        driver.configure(obj)
    return driver


def _ago(seconds: float) -> str:
    return format_rfc3339(dt.datetime.fromtimestamp(time.time() - seconds, dt.UTC))


def _workload(name: str, created: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return {
        "apiVersion": RAYQUOTA.workloads.api_version,
        "kind": "Workload",
        "metadata": {
            "namespace": NAMESPACE,
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
        },
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": template}]},
    }


def _condition(workload: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in workload["status"]["conditions"] if c["type"] == type_]
    assert found, f"no {type_} condition in {workload['status']['conditions']}"
    return found[0]


def _seconds(text: str) -> float:
    moment = parse_rfc3339(text)
    assert moment is not None, text
    return moment.timestamp()


async def _reserve(h: Harness, name: str, created: str) -> None:
    """Submitted, reserved by one cycle with its check Pending, and that written."""
    h.create_workload(_workload(name, created))
    h.submit(name)
    decisions = h.reconciler.driver.cycle(time.time())
    assert [d.workload for d in decisions if isinstance(d, Admit)] == [f"{NAMESPACE}/{name}"]
    reserved = await h.write_status(name)
    assert _condition(reserved, "QuotaReserved")["status"] == "True"
    assert reserved["status"]["admissionChecks"][0]["state"] == "Pending"


async def _retry_and_release(h: Harness, name: str, entries: list[dict[str, Any]]) -> str:
    """The check's controller writes ``entries``; the next cycle evicts; two reconciles (the
    eviction written, then the quota released once the cache shows it). Returns the time the
    eviction was written."""
    workload = h.workload(name)
    await h.manager.status.write(
        RAYQUOTA.workloads, workload, {**workload["status"], "admissionChecks": entries}
    )
    h.submit(name)
    [evicted] = [d for d in h.reconciler.driver.cycle(time.time()) if isinstance(d, Preempt)]
    assert evicted.kind is PreemptionReason.ADMISSION_CHECK
    job = rayjob(h.server, name)
    await h.reconcile_evicting(name, job)
    evicting = h.workload(name)
    assert evicting["status"].get("admission"), "the quota went back before the eviction was written"
    evicted_at = str(_condition(evicting, "Evicted")["lastTransitionTime"])
    await h.reconcile_evicting(name, job)
    assert not h.reconciler.driver.is_evicting(f"{NAMESPACE}/{name}"), "the quota was not released"
    return evicted_at


async def test_a_retry_with_no_pod_leaves_evicted_true_with_its_reason_and_time_and_the_backoff() -> None:
    h = harness(_driver())
    await _reserve(h, "first", _ago(100))
    annotated = h.workload("first")
    annotated["metadata"]["annotations"] = {f"{STATE_ANNOTATION_PREFIX}{CHECK}": "Retry"}
    decided = decided_entries(annotated, {CHECK}, now_rfc3339())
    assert decided is not None
    evicted_at = await _retry_and_release(h, "first", decided[0])

    released = h.workload("first")
    status = released["status"]
    assert not status.get("admission")
    evicted = _condition(released, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "AdmissionCheck")
    assert "AdmissionCheck in Retry state" in evicted["message"]
    assert evicted["lastTransitionTime"] == evicted_at
    assert _condition(released, "QuotaReserved")["status"] == "False"
    # The backoff the manual check asks (60 s at the first retry), as documented.
    requeued = _condition(released, "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("False", "AdmissionCheck")  # Kueue's
    assert status["requeueState"]["count"] == 1
    assert _seconds(status["requeueState"]["requeueAt"]) >= _seconds(evicted_at) + 59
    assert [(e["name"], e["state"], e.get("retryCount")) for e in status["admissionChecks"]] == [
        (CHECK, "Pending", 1)
    ]
    assert [e[2] for e in h.manager.recorder.events if e[1] == "Warning"][:1] == [RETRY_EVENT]
    # The engine holds the eviction the condition records: it orders the workload by it.
    spec = h.reconciler.driver.spec_of(f"{NAMESPACE}/first")
    assert spec is not None and spec.evicted == WorkloadEviction("AdmissionCheck", _seconds(evicted_at))

    # A later write (the pending sentence) keeps the condition as it is.
    h.submit("first")
    again = await h.write_status("first")
    assert _condition(again, "Evicted") == evicted


async def test_a_workload_a_check_sent_back_queues_behind_one_created_before_the_eviction() -> None:
    """Strict FIFO, room for one: ``first`` (created first) reserves, ``waited`` (created 50 s
    later) waits; the check asks for a retry with no backoff. Once the quota is back, ``waited``
    is admitted: ``first`` queues by its eviction's time. By creation time it would go first."""
    h = harness(_driver())
    await _reserve(h, "first", _ago(100))
    h.create_workload(_workload("waited", _ago(50)))
    h.submit("waited")
    assert not [d for d in h.reconciler.driver.cycle(time.time()) if isinstance(d, Admit)]

    retry = {"name": CHECK, "state": "Retry", "lastTransitionTime": now_rfc3339(), "message": "no capacity"}
    evicted_at = await _retry_and_release(h, "first", [retry])

    admitted = [d.workload for d in h.reconciler.driver.cycle(time.time()) if isinstance(d, Admit)]
    assert admitted == [f"{NAMESPACE}/waited"]
    h.submit("first")
    pending = await h.write_status("first")
    assert _condition(pending, "Evicted")["lastTransitionTime"] == evicted_at

    # Quota reserved again: the condition goes (Kueue's lifecycle), the check waits afresh.
    h.reconciler.driver.finish(f"{NAMESPACE}/waited", pods_gone=True)
    admitted = [d.workload for d in h.reconciler.driver.cycle(time.time()) if isinstance(d, Admit)]
    assert admitted == [f"{NAMESPACE}/first"]
    reserved = await h.write_status("first")
    assert "Evicted" not in {c["type"] for c in reserved["status"]["conditions"]}
    assert _condition(reserved, "QuotaReserved")["status"] == "True"
    assert [e["state"] for e in reserved["status"]["admissionChecks"]] == ["Pending"]


async def test_a_retry_recorded_while_no_operator_ran_evicts_after_a_restart() -> None:
    """The check's controller wrote Retry on a reservation and the operator restarted before
    acting on it: the engine rebuilt from the Workloads evicts it once the Workload's first
    reconcile feeds the states (it held Retry as already seen, and the quota for good)."""
    h = harness(_driver())
    await _reserve(h, "first", _ago(100))
    workload = h.workload("first")
    retry = {"name": CHECK, "state": "Retry", "lastTransitionTime": now_rfc3339(), "message": "no capacity"}
    await h.manager.status.write(
        RAYQUOTA.workloads, workload, {**workload["status"], "admissionChecks": [retry]}
    )

    restarted = AdmissionLoop(decisions=RecordingWriter())
    for obj in _config():
        restarted.driver.configure(obj)
    assert restarted.restore([h.workload("first")]) == [ObjectKey(NAMESPACE, "first")]
    after = harness(restarted.driver)
    after.server.objects = h.server.objects
    after.submit("first")
    [evicted] = [d for d in restarted.driver.cycle(time.time()) if isinstance(d, Preempt)]
    assert evicted.kind is PreemptionReason.ADMISSION_CHECK
    job = rayjob(after.server, "first")
    await after.reconcile_evicting("first", job)
    await after.reconcile_evicting("first", job)
    released = after.workload("first")
    assert not released["status"].get("admission")
    assert (_condition(released, "Evicted")["reason"], _condition(released, "Requeued")["reason"]) == (
        "AdmissionCheck",
        "BackoffFinished",  # no backoff was asked: Kueue ends it at once
    )
