"""Kubernetes Events recorded the way client-go's recorder does.

- The same object, type, reason and message within `window_s` updates the existing Event's
  `count` and `lastTimestamp` instead of creating a new Event.
- More than `similar_limit` different messages for the same object, type and reason within the
  window are combined into one Event ("(combined from similar events): <latest message>"),
  as client-go's aggregator does: failure messages usually name a pod, so they never repeat.
- A token bucket per object and reason (burst 25, one token back every 5 minutes, as client-go's
  spam filter) bounds what any failure loop can post; keyed by reason too, so a long-running
  object's rare milestones (an upgrade's last step) are never starved by its routine events.
- Recording never blocks a reconcile and never raises: events are queued and written by a few
  background writers (an object's events always go to the same writer, so its series stay in
  order); a full queue drops the newest.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from rayquota.operator.core.resources import EVENTS
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.kube import ApiError, KubeClient, NotFound

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
COMBINED_PREFIX = "(combined from similar events): "


@dataclass
class _Series:
    name: str
    namespace: str
    count: int
    first_timestamp: str
    last_seen: float


@dataclass
class _Bucket:
    tokens: float
    updated: float


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
        burst: int = 25,
        refill_s: float = 300.0,
        window_s: float = 600.0,
        similar_limit: int = 10,
        queue_size: int = 10_000,
        writers: int = 4,
        remembered: int = 8192,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.component = component
        self.burst = burst
        self.refill_s = refill_s
        self.window_s = window_s
        self.similar_limit = similar_limit
        # (uid, type, reason) -> (messages seen in the window, when the window started)
        self._similar: OrderedDict[tuple[str, str, str], tuple[set[str], float]] = OrderedDict()
        self._clock = clock
        self._queues: list[asyncio.Queue[_Pending]] = [
            asyncio.Queue(maxsize=max(1, queue_size // writers)) for _ in range(max(1, writers))
        ]
        self._series: OrderedDict[tuple[str, str, str, str], _Series] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._remembered = remembered
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

    def _allow(self, bucket_key: str) -> bool:
        now = self._clock()
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = self._buckets[bucket_key] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) / self.refill_s)
        bucket.updated = now
        self._buckets.move_to_end(bucket_key)
        while len(self._buckets) > self._remembered:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _aggregate(self, uid: str, pending: _Pending, now: float) -> str:
        """The message to record: the event's own, or the combined form once too many differ."""
        key = (uid, pending.type_, pending.reason)
        seen, since = self._similar.get(key, (set(), now))
        if now - since >= self.window_s:
            seen, since = set(), now
        seen.add(pending.message)
        self._similar[key] = (seen, since)
        self._similar.move_to_end(key)
        while len(self._similar) > self._remembered:
            self._similar.popitem(last=False)
        if len(seen) > self.similar_limit:
            return (COMBINED_PREFIX + pending.message)[:MAX_MESSAGE]
        return pending.message

    async def _write(self, pending: _Pending) -> None:
        involved = pending.involved
        uid = str(involved.get("uid") or f"{involved['namespace']}/{involved['name']}")
        if not self._allow(f"{uid}/{pending.reason}"):
            self.dropped += 1
            return
        now, timestamp = self._clock(), now_rfc3339()
        message = self._aggregate(uid, pending, now)
        key = (uid, pending.type_, pending.reason, COMBINED_PREFIX if message != pending.message else message)
        series = self._series.get(key)
        if series is not None and now - series.last_seen < self.window_s:
            series.count += 1
            series.last_seen = now
            try:
                await self.client.merge_patch(
                    EVENTS.path(series.namespace, series.name),
                    {"count": series.count, "lastTimestamp": timestamp, "message": message},
                )
                self.updated += 1
                return
            except NotFound:
                pass  # the Event expired (the API server keeps them an hour): start a new one
        name = f"{involved['name']}.{secrets.token_hex(8)}"
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
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
        }
        await self.client.create(EVENTS.path(involved["namespace"]), event)
        self.created += 1
        self._series[key] = _Series(name, involved["namespace"], 1, timestamp, now)
        self._series.move_to_end(key)
        while len(self._series) > self._remembered:
            self._series.popitem(last=False)
