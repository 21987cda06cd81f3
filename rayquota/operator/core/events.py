"""Kubernetes Events, recorded the way client-go's recorder records them.

What is written follows client-go's correlator (``event_correlator.py``): repeats patch the
existing Event's count, more than nine different messages of one kind about one object within
ten minutes become one "(combined from similar events)" Event, and a token bucket per object
(burst 25, one token back every 5 minutes) bounds what any failure loop can post.

Recording never blocks a reconcile and never raises: events are queued and written by a few
background writers (an object's events always go to the same writer, so its series stay in
order); a full queue drops the newest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from rayquota.operator.core.event_correlator import EventCorrelator, EventSource, Verdict
from rayquota.operator.core.resources import EVENTS
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.kube import ApiError, KubeClient, NotFound

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024


@dataclass(frozen=True)
class _Pending:
    involved: dict[str, Any]
    type_: str
    reason: str
    message: str


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str = "rayquota-operator",
        *,
        correlator: EventCorrelator | None = None,
        queue_size: int = 10_000,
        writers: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.component = component
        self.correlator = correlator or EventCorrelator()
        self._clock = clock
        self._queues: list[asyncio.Queue[_Pending]] = [
            asyncio.Queue(maxsize=max(1, queue_size // writers)) for _ in range(max(1, writers))
        ]
        self.created = 0
        self.updated = 0
        self.dropped = 0

    async def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an event about `obj`; returns at once."""
        self.post(obj, type_, reason, message)

    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        queue = self._queues[hash(str(involved.get("uid") or involved["name"])) % len(self._queues)]
        try:
            queue.put_nowait(_Pending(involved, type_, reason, message[:MAX_MESSAGE]))
        except asyncio.QueueFull:
            self.dropped += 1

    @property
    def backlog(self) -> int:
        return sum(q.qsize() for q in self._queues)

    async def run(self) -> None:
        await asyncio.gather(*(self._write_from(queue) for queue in self._queues))

    async def _write_from(self, queue: asyncio.Queue[_Pending]) -> None:
        while True:
            pending = await queue.get()
            try:
                await self._write(pending)
            except asyncio.CancelledError:
                raise
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning(
                    "could not record event %s on %s: %s", pending.reason, pending.involved["name"], exc
                )

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (at shutdown), for at most `timeout_s`."""
        deadline = self._clock() + timeout_s
        for queue in self._queues:
            while not queue.empty() and self._clock() < deadline:
                try:
                    await asyncio.wait_for(self._write(queue.get_nowait()), deadline - self._clock())
                except (ApiError, aiohttp.ClientError, TimeoutError):
                    continue

    async def _write(self, pending: _Pending) -> None:
        involved = pending.involved
        timestamp = now_rfc3339()
        verdict = self.correlator.correlate(
            EventSource.of(self.component, involved),
            pending.type_,
            pending.reason,
            pending.message,
            self._clock(),
            timestamp,
        )
        if verdict.skip:
            self.dropped += 1
            return
        message = verdict.message[:MAX_MESSAGE]
        if verdict.existing is not None:
            try:
                await self.client.merge_patch(
                    EVENTS.path(str(involved["namespace"]), verdict.existing),
                    {"count": verdict.count, "lastTimestamp": timestamp, "message": message},
                )
                self.updated += 1
                return
            except NotFound:
                pass  # the Event expired (the API server keeps them an hour): create it again
        await self._create(pending, verdict, message, timestamp)

    async def _create(self, pending: _Pending, verdict: Verdict, message: str, timestamp: str) -> None:
        involved = pending.involved
        # client-go's naming: the object's name and the time in nanoseconds, in hex.
        name = f"{involved['name']}.{time.time_ns():x}"
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": involved["namespace"]},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": pending.reason,
            "message": message,
            "type": pending.type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": verdict.first_timestamp or timestamp,
            "lastTimestamp": timestamp,
            "count": verdict.count,
        }
        await self.client.create(EVENTS.path(str(involved["namespace"])), event)
        self.correlator.created(verdict, name)
        self.created += 1
