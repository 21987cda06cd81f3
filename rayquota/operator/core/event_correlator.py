"""Which Events to write, and how: the rules of client-go's event correlator
(``tools/record/events_cache.go``), so a failure loop costs the API server what it costs under
KubeRay or any controller-runtime operator, and no more.

Per event, in client-go's order:

1. **Aggregation.** Events that differ only in their message (same source, object, type and
   reason) are *similar*. Each group remembers the distinct messages it saw and when it last saw
   one; a group idle for more than ``aggregate_window_s`` (10 minutes) starts afresh. Once a group
   holds ``aggregate_max`` (10) distinct messages, the event becomes the group's one aggregated
   event, "(combined from similar events): <latest message>", and the group keeps one fewer
   message, so every further new message is combined as well.
2. **Counting.** An event seen before (same key: the full event, or the group for an aggregated
   one) patches the existing Event's ``count``, ``lastTimestamp`` and ``message``; a new one is
   created. The count goes up even when step 3 drops the write, so the next write that is let
   through carries the full count.
3. **Spam filter.** A token bucket per source and object (``burst`` 25, one token back every
   ``refill_s`` 300 s), whatever the reason: creates and patches both spend a token.

Each table is bounded (least recently used first out, 4096 entries as in client-go). Pure and
synchronous: the recorder (``events.py``) does the writing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

COMBINED_PREFIX = "(combined from similar events): "
AGGREGATE_MAX = 10
AGGREGATE_WINDOW_S = 600.0
SPAM_BURST = 25
SPAM_REFILL_S = 300.0
REMEMBERED = 4096

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


@dataclass(frozen=True)
class EventSource:
    """What identifies an event's object and sender (client-go's spam key)."""

    component: str
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str

    @staticmethod
    def of(component: str, involved: Mapping[str, Any]) -> EventSource:
        return EventSource(
            component,
            str(involved.get("kind") or ""),
            str(involved.get("namespace") or ""),
            str(involved.get("name") or ""),
            str(involved.get("uid") or ""),
            str(involved.get("apiVersion") or ""),
        )


@dataclass
class _SimilarGroup:
    messages: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    last_seen: float = 0.0


@dataclass
class _Logged:
    name: str
    count: int
    first_timestamp: str


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class Verdict:
    """What to write for one event. ``existing`` names the Event to patch (None: create one)."""

    skip: bool
    message: str = ""
    count: int = 1
    existing: str | None = None
    first_timestamp: str = ""
    key: tuple[Any, ...] = ()


class EventCorrelator:
    def __init__(
        self,
        *,
        aggregate_max: int = AGGREGATE_MAX,
        aggregate_window_s: float = AGGREGATE_WINDOW_S,
        burst: int = SPAM_BURST,
        refill_s: float = SPAM_REFILL_S,
        remembered: int = REMEMBERED,
    ) -> None:
        self.aggregate_max = aggregate_max
        self.aggregate_window_s = aggregate_window_s
        self.burst = burst
        self.refill_s = refill_s
        self._groups: _Lru[tuple[Any, ...], _SimilarGroup] = _Lru(remembered)
        self._logged: _Lru[tuple[Any, ...], _Logged] = _Lru(remembered)
        self._buckets: _Lru[EventSource, _Bucket] = _Lru(remembered)

    def correlate(
        self, source: EventSource, type_: str, reason: str, message: str, now: float, timestamp: str
    ) -> Verdict:
        """``now``: a monotonic clock for the windows; ``timestamp``: the RFC 3339 time of the event."""
        group_key = (source, type_, reason)
        key, message = self._aggregate(group_key, message, now)
        logged = self._logged.get(key)
        if logged is None:
            logged = _Logged("", 1, timestamp)
        else:
            logged = _Logged(logged.name, logged.count + 1, logged.first_timestamp)
        self._logged.put(key, logged)
        if not self._take_token(source, now):
            return Verdict(skip=True)
        return Verdict(False, message, logged.count, logged.name or None, logged.first_timestamp, key)

    def created(self, verdict: Verdict, name: str) -> None:
        """The Event for ``verdict`` was created as ``name``: later similar events patch it."""
        logged = self._logged.get(verdict.key)
        if logged is not None:
            logged.name = name

    def _aggregate(self, group_key: tuple[Any, ...], message: str, now: float) -> tuple[tuple[Any, ...], str]:
        group = self._groups.get(group_key)
        if group is None or now - group.last_seen > self.aggregate_window_s:
            group = _SimilarGroup()
        group.messages[message] = None
        group.last_seen = now
        self._groups.put(group_key, group)
        if len(group.messages) < self.aggregate_max:
            return (*group_key, message), message
        # Keep the group one short of the limit: any new message after this one is combined too.
        del group.messages[next(iter(group.messages))]
        return group_key, COMBINED_PREFIX + message

    def _take_token(self, source: EventSource, now: float) -> bool:
        bucket = self._buckets.get(source)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) / self.refill_s)
        bucket.updated = now
        self._buckets.put(source, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
