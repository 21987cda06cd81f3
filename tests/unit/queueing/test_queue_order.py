"""Kueue's queue order timestamp: the rule (:func:`queue_order_time`) and the engine's lines,
preemption and the requeuing-timestamp setting that follow it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rayquota.queueing import (
    Admit,
    ClusterQueue,
    Engine,
    Preempt,
    Preemption,
    QueueingStrategy,
    RequeuingTimestamp,
    WithinClusterQueuePolicy,
    WorkloadEviction,
    queue_order_time,
)

from .builders import engine_with_flavors, gpu_group, gpus, queue

EVICTION = RequeuingTimestamp.EVICTION
CREATION = RequeuingTimestamp.CREATION


@pytest.mark.parametrize(
    ("reason", "setting", "expected"),
    [
        ("PodsReadyTimeout", EVICTION, 30.0),  # behind those that waited meanwhile
        ("PodsReadyTimeout", CREATION, 10.0),  # keeps its place
        ("AdmissionCheck", EVICTION, 30.0),  # whatever the setting
        ("AdmissionCheck", CREATION, 30.0),
        ("Preempted", EVICTION, 10.0),  # a preempted workload keeps its place
        ("InClusterQueue", EVICTION, 10.0),  # rayquota.io's preemption reason: likewise
        ("ClusterQueueStopped", EVICTION, 10.0),
        ("Deactivated", CREATION, 10.0),
    ],
)
def test_the_eviction_time_counts_only_for_a_pods_ready_timeout_or_a_check(
    reason: str, setting: RequeuingTimestamp, expected: float
) -> None:
    assert queue_order_time(10.0, WorkloadEviction(reason, 30.0), setting) == expected


def test_a_workload_never_evicted_queues_by_its_creation_time() -> None:
    assert queue_order_time(10.0, None, EVICTION) == 10.0
    assert queue_order_time(10.0, None, CREATION) == 10.0


def _strict_one_slot(engine: Engine) -> None:
    queue(
        engine,
        ClusterQueue(
            "team",
            resource_groups=gpu_group(("h100", 1, None, None)),
            queueing_strategy=QueueingStrategy.STRICT_FIFO,
        ),
    )


def _admitted(engine: Engine) -> list[str]:
    return [d.workload for d in engine.run_cycle(100.0) if isinstance(d, Admit)]


@pytest.mark.parametrize(("setting", "first"), [(EVICTION, "team/w2"), (CREATION, "team/w1")])
def test_a_workload_evicted_for_pods_not_ready_goes_behind_one_created_before_the_eviction(
    setting: RequeuingTimestamp, first: str
) -> None:
    engine = engine_with_flavors("h100", requeuing_timestamp=setting)
    _strict_one_slot(engine)
    evicted = replace(gpus("team", "w1", 1, created=1.0), evicted=WorkloadEviction("PodsReadyTimeout", 3.0))
    engine.add_workload(evicted)
    engine.add_workload(gpus("team", "w2", 1, created=2.0))

    assert _admitted(engine) == [first]
    assert engine.pending_order("team")[0][0] != first


def test_an_update_that_brings_the_eviction_moves_the_pending_workload() -> None:
    engine = engine_with_flavors("h100")
    _strict_one_slot(engine)
    engine.add_workload(gpus("team", "w1", 1, created=1.0))
    engine.add_workload(gpus("team", "w2", 1, created=2.0))
    assert [key for key, _ in engine.pending_order("team")] == ["team/w1", "team/w2"]

    engine.update_workload(
        replace(gpus("team", "w1", 1, created=1.0), evicted=WorkloadEviction("AdmissionCheck", 3.0))
    )

    assert [key for key, _ in engine.pending_order("team")] == ["team/w2", "team/w1"]


def test_lower_or_newer_equal_priority_judges_newer_by_the_queue_order_time() -> None:
    """Kueue compares the preemptor's and the candidate's queue order timestamps: a running
    workload created after the preemptor but queued (by an admission check's eviction) after it
    is no longer newer once the preemptor itself was evicted later still."""
    policy = Preemption(within_cluster_queue=WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)

    def victims(preemptor_evicted_at: float | None) -> list[str]:
        engine = engine_with_flavors("h100")
        queue(
            engine,
            ClusterQueue("team", resource_groups=gpu_group(("h100", 1, None, None)), preemption=policy),
        )
        engine.add_workload(gpus("team", "running", 1, created=5.0))
        engine.run_cycle(0.0)
        preemptor = gpus("team", "preemptor", 1, created=1.0)
        if preemptor_evicted_at is not None:
            preemptor = replace(preemptor, evicted=WorkloadEviction("AdmissionCheck", preemptor_evicted_at))
        engine.add_workload(preemptor)
        return [v for d in engine.run_cycle(1.0) if isinstance(d, Preempt) for v in d.victims]

    assert victims(None) == ["team/running"]  # created before it: the running one is newer
    assert victims(9.0) == []  # queued at 9, after the running one's 5: not newer
