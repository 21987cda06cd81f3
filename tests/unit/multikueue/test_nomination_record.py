"""A nomination is recorded on the manager's Workload before any copy is made in a worker, and
the dispatched object gets an event naming the nominated workers
(rayquota/operator/queue/multikueue/dispatcher.py, WorkloadDispatcher._carry_out)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.multikueue.dispatch import Plan
from rayquota.operator.queue.multikueue.dispatcher import WorkloadDispatcher, nomination_message
from rayquota.operator.queue.multikueue.settings import Dispatcher, MultiKueueSettings

WORKLOAD = {
    "apiVersion": "rayquota.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "rayjob-inc-1", "namespace": "team"},
    "spec": {"queueName": "team"},
    "status": {},
}
RAYJOB = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "inc", "namespace": "team"}}


class Journal:
    """Every write the dispatcher makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def write(self, _resource: object, _obj: object, status: dict[str, Any]) -> None:
        self.calls.append(("status", status.get("nominatedClusterNames")))

    def post(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.calls.append(("event", (obj["metadata"]["name"], type_, reason, message)))

    async def create(self, worker: Any, _resource: object, _body: object) -> None:
        self.calls.append(("create", worker.name))

    async def remove(self, worker: Any, _key: object, *, fence: bool = False) -> None:
        self.calls.append(("remove", worker.name))


def dispatcher(journal: Journal, kind: Dispatcher) -> WorkloadDispatcher:
    workers = {name: SimpleNamespace(name=name) for name in ("worker1", "worker2")}
    made = object.__new__(WorkloadDispatcher)
    made.manager = cast(Any, SimpleNamespace(status=journal, recorder=journal))
    made.objects = cast(Any, SimpleNamespace(api=SimpleNamespace(workloads="workloads")))
    made.settings = MultiKueueSettings(dispatcher=kind)
    made.workers = cast(Any, SimpleNamespace(get=workers.get))
    made.writes = cast(Any, journal)
    return made


def carry_out(journal: Journal, kind: Dispatcher, plan: Plan) -> None:
    queued = cast(Any, SimpleNamespace(obj=RAYJOB))
    key = ObjectKey("team", "rayjob-inc-1")
    asyncio.run(dispatcher(journal, kind)._carry_out(plan, key, WORKLOAD, {}, queued, "1/t"))


def test_the_nomination_is_written_and_told_before_the_copy_is_made() -> None:
    journal = Journal()
    carry_out(journal, Dispatcher.INCREMENTAL, Plan(create=["worker2"], nominate=("worker1", "worker2")))
    assert journal.calls == [
        ("status", ["worker1", "worker2"]),
        (
            "event",
            ("inc", "Normal", "MultiKueue", "Nominated workers (Incremental dispatcher): worker1, worker2"),
        ),
        ("create", "worker2"),
    ]


def test_copies_outside_a_narrower_nomination_go_before_it_is_written() -> None:
    journal = Journal()
    carry_out(journal, Dispatcher.ALL_AT_ONCE, Plan(delete=["worker2"], nominate=("worker1",)))
    assert [call[0] for call in journal.calls] == ["remove", "status", "event"]
    assert journal.calls[0] == ("remove", "worker2")


def test_no_nomination_change_writes_nothing_and_tells_nothing() -> None:
    journal = Journal()
    carry_out(journal, Dispatcher.MOST_FREE_QUOTA, Plan(create=["worker1"]))
    assert journal.calls == [("create", "worker1")]


def test_an_empty_nomination_says_none() -> None:
    assert nomination_message(Dispatcher.ALL_AT_ONCE, ()) == "Nominated workers (AllAtOnce dispatcher): none"
