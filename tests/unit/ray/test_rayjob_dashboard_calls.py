"""The RayJob controller's dashboard calls in flight: one per object, bounded, answers re-queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from rayquota.operator.ray.rayjob.dashboard_calls import Answer, DashboardCalls, NoAnswerYet, Purpose
from tests.polling import wait_for_async

STATUS = Purpose("status", "job-1", "127.0.0.1:8265")
NEXT_ATTEMPT = Purpose("status", "job-2", "127.0.0.1:8265")


class Dashboard:
    """Calls that end only when the test says so."""

    def __init__(self) -> None:
        self.gates: list[asyncio.Event] = []
        self.cancelled = 0

    async def answer(self, value: object) -> object:
        gate = asyncio.Event()
        self.gates.append(gate)
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return value

    def release_all(self) -> None:
        for gate in self.gates:
            gate.set()


async def settled(what: str, probe: Callable[[], bool]) -> None:
    await wait_for_async(what, probe, timeout_s=5, interval_s=0.01)


def calls(requeued: list[str], wait_s: float = 0.01, limit: int = 64) -> DashboardCalls[str]:
    return DashboardCalls(requeued.append, answer_wait_s=wait_s, limit=limit)


async def test_a_fast_answer_is_read_by_the_reconcile_that_started_it_without_a_requeue() -> None:
    requeued: list[str] = []
    inflight = calls(requeued, wait_s=5.0)

    async def quick() -> object:
        return "RUNNING"

    answer = await inflight.call("a", STATUS, quick)
    assert isinstance(answer, Answer) and answer.get() == "RUNNING"
    assert requeued == [] and inflight.in_flight == 0 and inflight.purpose_of("a") is None


async def test_a_late_answer_requeues_the_object_and_is_read_once_by_the_next_reconcile() -> None:
    requeued: list[str] = []
    inflight = calls(requeued)
    dashboard = Dashboard()

    assert await inflight.call("a", STATUS, lambda: dashboard.answer("RUNNING")) is NoAnswerYet.IN_FLIGHT
    # A reconcile meanwhile (a watch event) starts no second call.
    assert await inflight.call("a", STATUS, lambda: dashboard.answer("other")) is NoAnswerYet.IN_FLIGHT
    assert len(dashboard.gates) == 1 and inflight.in_flight == 1

    dashboard.release_all()
    await settled("the answer re-queues the key", lambda: requeued == ["a"])
    answer = await inflight.call("a", STATUS, lambda: dashboard.answer("unused"))
    assert isinstance(answer, Answer) and answer.get() == "RUNNING"
    assert inflight.in_flight == 0 and len(dashboard.gates) == 1
    # Read once: the next reconcile starts a new poll.
    assert await inflight.call("a", STATUS, lambda: dashboard.answer("next")) is NoAnswerYet.IN_FLIGHT
    assert len(dashboard.gates) == 2
    await inflight.close()


async def test_an_error_is_the_answer() -> None:
    requeued: list[str] = []
    inflight = calls(requeued)

    async def refused() -> object:
        raise ConnectionError("refused")

    answer = await inflight.call("a", STATUS, refused)
    assert isinstance(answer, Answer)
    with pytest.raises(ConnectionError, match="refused"):
        answer.get()


async def test_a_new_attempt_drops_the_call_in_flight_and_its_answer_never_arrives() -> None:
    requeued: list[str] = []
    inflight = calls(requeued)
    dashboard = Dashboard()

    await inflight.call("a", STATUS, lambda: dashboard.answer("old attempt"))
    assert await inflight.call("a", NEXT_ATTEMPT, lambda: dashboard.answer("new")) is NoAnswerYet.IN_FLIGHT
    await settled("the old call cancelled", lambda: dashboard.cancelled == 1)
    assert inflight.in_flight == 1 and inflight.purpose_of("a") == NEXT_ATTEMPT
    dashboard.release_all()
    await settled("the new answer re-queues", lambda: requeued == ["a"])
    answer = await inflight.call("a", NEXT_ATTEMPT, lambda: dashboard.answer("unused"))
    assert isinstance(answer, Answer) and answer.get() == "new"


async def test_drop_by_kind_leaves_other_kinds_in_flight() -> None:
    requeued: list[str] = []
    inflight = calls(requeued)
    dashboard = Dashboard()
    stop = Purpose("stop", "job-1", "127.0.0.1:8265")

    await inflight.call("a", stop, lambda: dashboard.answer(True))
    inflight.drop("a", "status")  # the RayJob left Running: only a status poll is dropped
    assert inflight.purpose_of("a") == stop
    inflight.drop("a")
    assert inflight.purpose_of("a") is None and inflight.in_flight == 0
    await settled("the stop cancelled", lambda: dashboard.cancelled == 1)
    assert requeued == []


async def test_the_total_in_flight_is_bounded() -> None:
    requeued: list[str] = []
    inflight = calls(requeued, limit=2)
    dashboard = Dashboard()

    for key in ("a", "b"):
        assert await inflight.call(key, STATUS, lambda k=key: dashboard.answer(k)) is NoAnswerYet.IN_FLIGHT
    assert await inflight.call("c", STATUS, lambda: dashboard.answer("c")) is NoAnswerYet.NO_ROOM
    assert len(dashboard.gates) == 2 and inflight.purpose_of("c") is None
    # An answered call frees its place even before it is read.
    dashboard.release_all()
    await settled("both answers", lambda: sorted(requeued) == ["a", "b"])
    assert await inflight.call("c", STATUS, lambda: dashboard.answer("c")) is NoAnswerYet.IN_FLIGHT
    await inflight.close()


async def test_close_cancels_every_call_and_refuses_new_ones() -> None:
    requeued: list[str] = []
    inflight = calls(requeued)
    dashboard = Dashboard()
    for key in ("a", "b", "c"):
        await inflight.call(key, STATUS, lambda k=key: dashboard.answer(k))

    await inflight.close()
    assert dashboard.cancelled == 3 and inflight.in_flight == 0 and requeued == []
    assert await inflight.call("a", STATUS, lambda: dashboard.answer("a")) is NoAnswerYet.NO_ROOM
