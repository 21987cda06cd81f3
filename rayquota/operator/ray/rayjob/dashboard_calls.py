"""Ray dashboard calls in flight off the reconcile workers.

A dashboard can be slow to answer, or its name slow to resolve (this machine's resolver sometimes
takes 5 s for a `*-head-svc` name that does not exist). A reconcile that waited for it would hold
one of the controller's few workers, and the RayJobs queued behind it (a just-admitted one among
them) would wait too. So a reconcile starts its call here and waits only a moment for the answer;
a late answer re-queues the object, and the next reconcile reads it (KubeRay's
`AsyncJobInfoQuery` does the same for job status).

- One call per object: starting a call for another purpose (a new attempt's job id, a stop after
  the status poll) drops the one in flight, and its answer is never delivered.
- At most `limit` calls in flight in all: beyond it the caller is told there is no room and tries
  again later, so a flood of dashboards that do not answer costs a bounded number of tasks.
- An answer nobody has read stays until it is read, replaced or dropped (one per object).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

DEFAULT_LIMIT = 64
# Long enough for a dashboard on loopback to answer within the reconcile (one round trip less),
# short enough that a worker is never held by a slow one.
DEFAULT_ANSWER_WAIT_S = 0.02


class NoAnswerYet(enum.Enum):
    IN_FLIGHT = "in flight"  # the answer re-queues the object
    NO_ROOM = "no room"  # `limit` calls are in flight: nothing was started, try again later


@dataclass(frozen=True)
class Purpose:
    """What a call is for: its kind ("status", "stop", ...) and the Ray job it concerns, at the
    dashboard it was started against. A new attempt has a new job id, so a new purpose."""

    kind: str
    job_id: str
    address: str


@dataclass(frozen=True)
class Answer:
    """A finished call: its value, or the exception it raised."""

    purpose: Purpose
    value: object = None
    error: BaseException | None = None

    def get(self) -> object:
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class _Call:
    purpose: Purpose
    task: asyncio.Task[object]
    # The reconcile that started it is waiting for the answer itself: no re-queue for it.
    awaited: bool = True


class DashboardCalls(Generic[K]):
    def __init__(
        self,
        on_answer: Callable[[K], None],
        *,
        limit: int = DEFAULT_LIMIT,
        answer_wait_s: float = DEFAULT_ANSWER_WAIT_S,
    ) -> None:
        """`on_answer(key)` is called when a call that is still wanted finishes (re-queue it)."""
        self._on_answer = on_answer
        self.limit = limit
        self.answer_wait_s = answer_wait_s
        self._calls: dict[K, _Call] = {}
        self._in_flight: set[asyncio.Task[object]] = set()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def running(self, key: K) -> bool:
        """Whether the key's call is still under way (its effects, a deploy, may still land)."""
        call = self._calls.get(key)
        return call is not None and not call.task.done()

    def purpose_of(self, key: K) -> Purpose | None:
        """The purpose of the key's call, in flight or answered and unread."""
        call = self._calls.get(key)
        return None if call is None else call.purpose

    async def call(
        self, key: K, purpose: Purpose, start: Callable[[], Awaitable[object]]
    ) -> Answer | NoAnswerYet:
        """The answer to the key's call for `purpose`, read once: from a call that finished, else
        from a new one (`start()`) if it finishes within `answer_wait_s`. A call for another
        purpose is dropped first."""
        current = self._calls.get(key)
        if current is not None and current.purpose == purpose:
            if not current.task.done():
                return NoAnswerYet.IN_FLIGHT
            return self._take(key, current)
        if current is not None:
            self.drop(key)
        if self._closed or len(self._in_flight) >= self.limit:
            return NoAnswerYet.NO_ROOM
        task: asyncio.Task[object] = asyncio.ensure_future(start())
        call = _Call(purpose, task)
        self._calls[key] = call
        self._in_flight.add(task)
        task.add_done_callback(lambda done: self._finished(key, call))
        try:
            await asyncio.wait({task}, timeout=self.answer_wait_s)
        finally:
            call.awaited = False
        if task.done() and self._calls.get(key) is call:
            return self._take(key, call)
        return NoAnswerYet.IN_FLIGHT

    def drop(self, key: K, kind: str | None = None) -> None:
        """Forget the key's call (only if it is of `kind`, when given); one in flight is cancelled
        and its answer never delivered."""
        call = self._calls.get(key)
        if call is None or (kind is not None and call.purpose.kind != kind):
            return
        del self._calls[key]
        self._in_flight.discard(call.task)
        call.task.cancel()

    async def close(self) -> None:
        """Cancel every call in flight and wait until they are gone (operator shutdown)."""
        self._closed = True
        tasks = [call.task for call in self._calls.values()]
        for key in list(self._calls):
            self.drop(key)
        await asyncio.gather(*tasks, return_exceptions=True)

    def _take(self, key: K, call: _Call) -> Answer:
        del self._calls[key]
        if call.task.cancelled():  # by someone else (the loop ending): not this reconcile's cancellation
            return Answer(call.purpose, error=RuntimeError(f"the dashboard call for {key} was cancelled"))
        error = call.task.exception()
        if error is not None:
            return Answer(call.purpose, error=error)
        return Answer(call.purpose, value=call.task.result())

    def _finished(self, key: K, call: _Call) -> None:
        self._in_flight.discard(call.task)
        if self._calls.get(key) is not call or call.task.cancelled() or call.awaited:
            return  # dropped (nobody wants this answer), or read by the reconcile that started it
        try:
            self._on_answer(key)
        except Exception:  # a failed re-queue must not be lost silently
            log.exception("re-queueing %s after its dashboard answer failed", key)
