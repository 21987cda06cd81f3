"""The queues' status: the ClusterQueue's Active condition (Ready, Stopped, Inactive with the
engine's reason, Terminating), the LocalQueue's, and the pending count."""

from __future__ import annotations

import asyncio
from typing import Any

from rayquota.operator.queue.status import (
    QueueStatusWriter,
    cluster_queue_status,
    local_queue_active,
    local_queue_status,
    waiting_slices_per_cluster_queue,
)
from rayquota.queueing import (
    ClusterQueue,
    ClusterQueueStatus,
    Engine,
    FlavorQuotas,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
)
from tests.unit.queue.fakes import gpu_workload, new_driver

NOW = "2026-11-22T09:00:00Z"


def active(status: ClusterQueueStatus, *, terminating: bool = False) -> dict[str, str]:
    written = cluster_queue_status(None, status, [], NOW, terminating=terminating)
    (condition,) = [c for c in written["conditions"] if c["type"] == "Active"]
    return condition


def test_a_deleted_cluster_queue_is_inactive_terminating_and_says_what_it_holds() -> None:
    status = ClusterQueueStatus("team", pending=1, admitted=2, usage={}, borrowed={}, disabled_reason=None)
    assert active(status)["status"] == "True"
    terminating = active(status, terminating=True)
    assert terminating["status"] == "False" and terminating["reason"] == "Terminating"
    assert "ClusterQueue team is being deleted" in terminating["message"]
    assert "2 admitted workload(s)" in terminating["message"]


def test_an_inactive_cluster_queue_gives_the_engines_reason() -> None:
    status = ClusterQueueStatus("team", 0, 0, {}, {}, disabled_reason="flavor x does not exist")
    inactive = active(status)
    assert inactive["status"] == "False" and inactive["reason"] == "Inactive"
    assert inactive["message"] == "flavor x does not exist"


def test_a_held_cluster_queue_is_not_active_with_kueues_stopped_reason() -> None:
    status = ClusterQueueStatus("team", 3, 1, {}, {}, disabled_reason=None)
    for policy in (StopPolicy.HOLD, StopPolicy.HOLD_AND_DRAIN):
        written = cluster_queue_status(None, status, [], NOW, stop_policy=policy)
        (held,) = [c for c in written["conditions"] if c["type"] == "Active"]
        assert (held["status"], held["reason"]) == ("False", "Stopped")
        assert policy in held["message"] and "Can admit" not in held["message"]
    # Terminating says more than Stopped (Kueue checks it first too).
    written = cluster_queue_status(None, status, [], NOW, terminating=True, stop_policy=StopPolicy.HOLD)
    assert [c["reason"] for c in written["conditions"] if c["type"] == "Active"] == ["Terminating"]


def test_a_local_queue_is_inactive_when_stopped_or_its_cluster_queue_is() -> None:
    lq = {"spec": {"clusterQueue": "cq"}}
    ready_cq = {"status": {"conditions": [{"type": "Active", "status": "True"}]}}
    held_cq = {"status": {"conditions": [{"type": "Active", "status": "False", "reason": "Stopped"}]}}
    assert local_queue_active(lq, ready_cq)[:2] == (True, "Ready")
    assert local_queue_active({"spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}}, ready_cq)[:2] == (
        False,
        "Stopped",
    )
    assert local_queue_active(lq, held_cq)[:2] == (False, "ClusterQueueIsInactive")
    assert local_queue_active(lq, None)[:2] == (False, "ClusterQueueDoesNotExist")
    written = local_queue_status(None, "ns", "lq", [], NOW, active=local_queue_active(lq, held_cq))
    assert [c["status"] for c in written["conditions"] if c["type"] == "Active"] == ["False"]


def test_an_admitted_workload_whose_scale_up_waits_counts_once_as_admitted() -> None:
    driver, _ = new_driver(nominal=4)
    driver.submit(gpu_workload("svc", "a", {"w1": 2}))
    driver.submit(gpu_workload("other", "a", {"w1": 2}, created=1))
    driver.submit(gpu_workload("b-team", "b", {"w1": 4}, created=1))  # nothing to borrow
    driver.cycle(0.0)
    driver.submit(gpu_workload("svc", "a", {"w1": 4}))  # an upgrade: 2 more GPUs, none free in the cohort
    driver.submit(gpu_workload("late", "a", {"w1": 1}, created=2))
    driver.cycle(1.0)
    engine = driver.engine
    assert driver.pending_reason("ns/svc") and driver.admission("ns/svc")
    raw = engine.cluster_queue_status("a")
    assert (raw.pending, raw.admitted) == (2, 2)  # the engine sees the slice as a workload of its own
    assert waiting_slices_per_cluster_queue(engine) == {"a": 1}
    written = cluster_queue_status(None, raw, [], NOW, waiting_slices=1)
    assert (written["pendingWorkloads"], written["admittedWorkloads"]) == (1, 2)


class Store:
    """An informer as the status writer reads it: ``.store.list()``."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.store = self
        self.objs = objs

    def list(self) -> list[dict[str, Any]]:
        return self.objs


def test_a_cluster_queue_deleted_during_a_status_pass_is_skipped_not_fatal() -> None:
    """The pass awaits each write; a ClusterQueue the engine forgets meanwhile (deleted) must not
    end the status writer (it used to raise KeyError and stop the operator)."""

    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("f"))
    for name in ("a", "b"):
        group = ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota.of(1)}),))
        engine.upsert_cluster_queue(ClusterQueue(name, (group,)))
    written: list[str] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            written.append(obj["metadata"]["name"])
            engine.delete_cluster_queue("b")  # deleted while this write is awaited

    manager = type("Manager", (), {"status": Status()})()
    queues = Store([{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}])
    writer = QueueStatusWriter(manager, engine, queues, Store([]), Store([]))  # type: ignore[arg-type]
    asyncio.run(writer.write_all())
    assert written == ["a"]


def test_queues_in_motion_share_a_write_budget_and_new_active_or_busy_ones_do_not_wait() -> None:
    """Kueue's large scale: 1,000 ClusterQueues whose counts change every pass must not cost a
    write each per pass; a queue with no status yet, whose Active condition changed, or that
    turned busy or idle (Kueue's recorder ends a run when no active queue shows pending or
    reserving Workloads) is written at once; the rest take turns, least recently written first."""
    from rayquota.operator.queue.status import WriteBudget

    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("f"))
    names = [f"cq-{i}" for i in range(6)]
    for name in names:
        group = ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota.of(1)}),))
        engine.upsert_cluster_queue(ClusterQueue(name, (group,)))
    written: list[str] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            written.append(obj["metadata"]["name"])
            obj["status"] = status

    clock = [0.0]
    manager = type("Manager", (), {"status": Status()})()
    queues = Store([{"metadata": {"name": n}} for n in names])
    writer = QueueStatusWriter(
        manager,  # type: ignore[arg-type]
        engine,
        queues,  # type: ignore[arg-type]
        Store([]),  # type: ignore[arg-type]
        Store([]),  # type: ignore[arg-type]
        budget=WriteBudget(1.0, 2, clock=lambda: clock[0]),
    )
    asyncio.run(writer.write_all())
    assert sorted(written) == names  # no status yet: all at once, whatever the budget
    for obj in queues.objs:
        obj["status"]["flavorsUsage"] = []  # what the next pass computes differs everywhere
    written.clear()
    asyncio.run(writer.write_all())
    assert len(written) == 2  # the burst
    first = list(written)
    for obj in queues.objs:
        obj["status"]["flavorsUsage"] = []
    # One of those just written shows work it no longer has: written whatever the budget.
    turned_idle = next(obj for obj in queues.objs if obj["metadata"]["name"] == first[0])
    turned_idle["status"]["pendingWorkloads"] = 3
    written.clear()
    clock[0] += 2.0
    asyncio.run(writer.write_all())
    assert first[0] in written and len(written) == 3
    assert not (set(written) - {first[0]}) & set(first)  # the others' turn


def test_a_pass_keeps_several_writes_in_flight_and_raises_the_first_failure_after_all() -> None:
    """One write after the other, the first pass over Kueue's 2,000 large-scale queues outlasted
    the runner's creation of its Workloads; its recorder saw no queue with pending Workloads and
    ended the run with nothing admitted."""
    from rayquota.operator.kube import ApiError
    from rayquota.operator.queue import status as queue_status

    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("f"))
    names = [f"cq-{i}" for i in range(2 * queue_status.STATUS_WRITES_IN_FLIGHT + 4)]
    for name in names:
        group = ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota.of(1)}),))
        engine.upsert_cluster_queue(ClusterQueue(name, (group,)))
    in_flight: list[int] = [0, 0]  # now, most
    written: list[str] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            await asyncio.sleep(0.01)
            in_flight[0] -= 1
            if obj["metadata"]["name"] == "cq-3":
                raise ApiError("PUT", "/clusterqueues/cq-3/status", 409, '{"message": "conflict"}')
            written.append(obj["metadata"]["name"])

    manager = type("Manager", (), {"status": Status()})()
    queues = Store([{"metadata": {"name": n}} for n in names])
    writer = QueueStatusWriter(manager, engine, queues, Store([]), Store([]))  # type: ignore[arg-type]
    try:
        asyncio.run(writer.write_all())
    except ApiError as exc:
        assert exc.status == 409
    else:
        raise AssertionError("the conflict was not raised")
    assert in_flight[1] == queue_status.STATUS_WRITES_IN_FLIGHT
    assert sorted(written) == sorted(n for n in names if n != "cq-3")  # the others all written


def test_a_local_queue_turning_busy_or_idle_is_written_whatever_the_budget() -> None:
    """As for ClusterQueues: a LocalQueue that gets its first pending Workload, or loses its
    last, is written at once; other changes of its status wait for the write budget."""
    from rayquota.operator.queue.status import WriteBudget

    written: list[str] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            written.append(obj["metadata"]["name"])
            obj["status"] = status

    class ClusterQueues(Store):
        def get(self, _namespace: str, name: str) -> dict[str, Any] | None:
            return {"metadata": {"name": name}} if name == "cq" else None

    manager = type("Manager", (), {"status": Status()})()
    local_queues = Store(
        [
            {"metadata": {"namespace": "team", "name": f"lq-{i}"}, "spec": {"clusterQueue": "cq"}}
            for i in range(3)
        ]
    )
    workloads = Store([])
    writer = QueueStatusWriter(
        manager,  # type: ignore[arg-type]
        Engine(),
        ClusterQueues([]),  # type: ignore[arg-type]
        local_queues,  # type: ignore[arg-type]
        workloads,  # type: ignore[arg-type]
        budget=WriteBudget(1.0, 0, clock=lambda: 0.0),  # no routine write ever
    )
    asyncio.run(writer.write_all())
    assert sorted(written) == ["lq-0", "lq-1", "lq-2"]  # no status yet

    def routine_change_everywhere() -> None:
        for obj in local_queues.objs:
            obj["status"]["stale"] = True  # what the next pass computes differs everywhere
        written.clear()

    workloads.objs.append({"metadata": {"namespace": "team", "name": "w"}, "spec": {"queueName": "lq-1"}})
    routine_change_everywhere()
    asyncio.run(writer.write_all())
    assert written == ["lq-1"]  # turned busy
    assert local_queues.objs[1]["status"]["pendingWorkloads"] == 1

    workloads.objs.clear()
    routine_change_everywhere()
    asyncio.run(writer.write_all())
    assert written == ["lq-1"]  # turned idle


def test_a_queue_naming_a_missing_flavor_turns_inactive_with_a_warning_event_once() -> None:
    engine = Engine()
    group = ResourceGroup(("cpu",), (FlavorQuotas("a10g", {"cpu": ResourceQuota.of(1)}),))
    engine.upsert_cluster_queue(ClusterQueue("a", (group,)))
    posted: list[tuple[str, str, str]] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            obj["status"] = status

    class Recorder:
        def post(self, obj: Any, type_: str, reason: str, message: str) -> None:
            posted.append((type_, reason, message))

    manager = type("Manager", (), {"status": Status(), "recorder": Recorder()})()
    queues = Store([{"metadata": {"name": "a"}}])
    writer = QueueStatusWriter(manager, engine, queues, Store([]), Store([]))  # type: ignore[arg-type]
    asyncio.run(writer.write_all())
    [stored] = queues.list()
    active = next(c for c in stored["status"]["conditions"] if c["type"] == "Active")
    assert (active["status"], active["reason"]) == ("False", "FlavorNotFound")
    message = "Can't admit new workloads: ResourceFlavor a10g not found"
    assert active["message"] == message
    assert posted == [("Warning", "FlavorNotFound", message)]
    asyncio.run(writer.write_all())
    assert len(posted) == 1  # said once, when it turned inactive
    engine.upsert_flavor(ResourceFlavor("a10g"))
    asyncio.run(writer.write_all())
    active = next(c for c in queues.list()[0]["status"]["conditions"] if c["type"] == "Active")
    assert (active["status"], active["reason"]) == ("True", "Ready") and len(posted) == 1
