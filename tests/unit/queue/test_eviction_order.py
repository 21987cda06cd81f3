"""A requeued Workload's place in line comes from its ``Evicted`` condition: the operator keeps the
condition true (reason and time) until quota is reserved again, and hands it to the engine."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.driver import AdmittedSlice, Eviction
from rayquota.operator.queue.admission.pods_ready import PODS_READY_TIMEOUT
from rayquota.operator.queue.admission.workload_status import desired_status
from rayquota.queueing import (
    Admit,
    ClusterQueue,
    Engine,
    FlavorQuotas,
    LocalQueue,
    PodSetAssignment,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WorkloadEviction,
)

CREATED = "2030-01-01T00:00:00Z"
EVICTED_AT = "2030-01-01T00:10:00Z"
ADMISSION = AdmittedSlice("team", (PodSetAssignment("main", 1, {"cpu": "default"}, {"cpu": 1000}),), {})


def _workload(name: str, created: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name, "creationTimestamp": created},
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": _template()}]},
        "status": status or {},
    }


def _template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def _evicted(condition: dict[str, Any]) -> dict[str, Any]:
    return _workload("w", CREATED, {"conditions": [{"type": "Evicted", **condition}]})


def _seconds(text: str) -> float:
    moment = parse_rfc3339(text)
    assert moment is not None
    return moment.timestamp()


def test_a_true_evicted_condition_is_the_workloads_last_eviction() -> None:
    body = _evicted({"status": "True", "reason": "PodsReadyTimeout", "lastTransitionTime": EVICTED_AT})
    assert converter.workload(body).evicted == WorkloadEviction("PodsReadyTimeout", _seconds(EVICTED_AT))


def test_a_false_or_timeless_evicted_condition_is_no_eviction() -> None:
    old_release = {"status": "False", "reason": "QuotaReleased", "lastTransitionTime": EVICTED_AT}
    assert converter.workload(_evicted(old_release)).evicted is None
    assert converter.workload(_evicted({"status": "True", "reason": "AdmissionCheck"})).evicted is None
    assert converter.workload(_workload("w", CREATED)).evicted is None


def test_the_released_workload_still_carries_its_eviction_and_queues_behind_a_newer_one() -> None:
    """Admitted, evicted for pods not ready in time, released: its status (as the reconciler
    writes it) still says when it was evicted, and the engine orders it by that moment."""
    admitted = desired_status(
        None, admission=ADMISSION, eviction=None, pending_reason=None, finished=False, now=CREATED
    )
    eviction = Eviction("pods not ready", PODS_READY_TIMEOUT, None)
    evicting = desired_status(
        admitted, admission=None, eviction=eviction, pending_reason=None, finished=False, now=EVICTED_AT
    )
    released = desired_status(
        evicting,
        admission=None,
        eviction=None,
        pending_reason="waiting",
        finished=False,
        now="2030-01-01T00:11:00Z",
    )
    requeued = converter.workload(_workload("requeued", CREATED, released))
    assert requeued.evicted == WorkloadEviction(PODS_READY_TIMEOUT, _seconds(EVICTED_AT))

    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default"))
    quota = FlavorQuotas("default", {"cpu": ResourceQuota.of(1)})
    engine.upsert_cluster_queue(
        ClusterQueue(
            "team",
            resource_groups=(ResourceGroup(("cpu",), (quota,)),),
            queueing_strategy=QueueingStrategy.STRICT_FIFO,
        )
    )
    engine.upsert_local_queue(LocalQueue("ns", "main", "team"))
    engine.add_workload(requeued)
    # Created five minutes after the requeued one, before its eviction.
    engine.add_workload(converter.workload(_workload("waited", "2030-01-01T00:05:00Z")))

    admitted_now = [d.workload for d in engine.run_cycle(_seconds(EVICTED_AT) + 120) if isinstance(d, Admit)]
    assert admitted_now == ["ns/waited"]
