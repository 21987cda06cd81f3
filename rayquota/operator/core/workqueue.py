"""A work queue shaped like controller-runtime's.

- One entry per key: adding a key that is already waiting does nothing, and a key being
  processed is re-queued once when it is added meanwhile, never handed to two workers.
- Per-key exponential backoff with jitter for failures (`add_rate_limited`), reset by `forget`.
- Timers (`add_after`) keep only the earliest pending wake-up per key.
- Lanes: decided work (`add_first`), then work that leads to a decision (`add_soon`), then
  routine keys (`add`), then polls (`add_after(..., poll=True)`): looks at something outside
  Kubernetes that makes no watch events (a Ray job's status). A poll yields to every other key;
  once it has waited `poll_max_wait_s`, polls take every other turn while other keys wait. Not
  a bound on the poll's wait: when polls are slow and many (hundreds of running Ray jobs whose
  dashboards answer late) the queue stays full, and any bound would hand every turn to the
  overdue polls again; taking turns keeps both moving.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.005
    max_s: float = 300.0
    jitter: float = 0.2  # the delay is scaled by a random factor in [1 - jitter, 1]

    def delay(self, failures: int, rng: random.Random) -> float:
        raw = min(self.max_s, self.base_s * 2.0 ** max(0, failures - 1))
        return float(raw * (1.0 - self.jitter * rng.random()))


class ShutDown(Exception):
    """The queue was shut down while waiting for a key."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        backoff: Backoff | None = None,
        *,
        seed: int | None = None,
        poll_max_wait_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = backoff or Backoff()
        self.poll_max_wait_s = poll_max_wait_s
        self._clock = clock
        self._rng = random.Random(seed)
        self._ready: deque[K] = deque()
        # Keys to hand out before _ready (add_first). A key may sit in both; the copy found
        # second is stale and skipped, so add_first never scans _ready.
        self._urgent: deque[K] = deque()
        # Between the two (add_soon): before routine keys, after decided work.
        self._soon: deque[K] = deque()
        # After _ready: polls, with the time each was queued. A key waiting here only is in
        # _polling; a routine or earlier add moves it up (the copy left here is then stale).
        self._polls: deque[tuple[K, float]] = deque()
        self._polling: set[K] = set()
        self._last_was_poll = False
        # Keys added ahead while being processed: done() puts them back in that lane.
        self._ahead_when_done: dict[K, deque[K]] = {}
        self._waiting = 0  # keys that will be handed out: dirty and not being processed
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        # key -> (due, handle, poll): the earliest pending wake-up, a poll only if every
        # wake-up asked for it was one.
        self._timers: dict[K, tuple[float, asyncio.TimerHandle, bool]] = {}
        self._failures: dict[K, int] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutdown = False

    def __len__(self) -> int:
        return self._waiting

    @property
    def waiting_timers(self) -> int:
        return len(self._timers)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def add(self, key: K) -> None:
        if self._shutdown:
            return
        if key in self._dirty:
            if key in self._polling:  # waiting as a poll: a routine change moves it up
                self._polling.discard(key)
                self._ready.append(key)
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._ready.append(key)
            self._waiting += 1
            self._notify()

    def add_poll(self, key: K) -> None:
        """Like :meth:`add`, but behind every routine key (see the module's lanes)."""
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._polling.add(key)
            self._polls.append((key, self._clock()))
            self._waiting += 1
            self._notify()

    def add_first(self, key: K) -> None:
        """Like :meth:`add`, but at the front: work already decided (an admission, an eviction)
        must not wait behind a flood of routine watch events."""
        self._add_ahead(self._urgent, key)

    def add_soon(self, key: K) -> None:
        """Ahead of routine keys but behind :meth:`add_first`'s: work that leads to a decision
        (a new arrival's first step) must not delay the decisions already made."""
        self._add_ahead(self._soon, key)

    def _add_ahead(self, lane: deque[K], key: K) -> None:
        if self._shutdown:
            return
        if key in self._processing:
            self._dirty.add(key)  # done() requeues it, in this lane
            if self._ahead_when_done.get(key) is not self._urgent:
                self._ahead_when_done[key] = lane
            return
        if key not in self._dirty:
            self._dirty.add(key)
            self._waiting += 1
        self._polling.discard(key)
        lane.append(key)
        self._notify()

    def add_after(self, key: K, delay_s: float, *, poll: bool = False) -> None:
        """Add the key after `delay_s`; as a poll (behind routine keys) when `poll`."""
        if self._shutdown:
            return
        if delay_s <= 0:
            (self.add_poll if poll else self.add)(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay_s
        current = self._timers.get(key)
        if current is not None:
            poll = poll and current[2]
            if current[0] <= due and poll == current[2]:
                return
            due = min(due, current[0])
            current[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key), poll)

    def add_rate_limited(self, key: K) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self.backoff.delay(failures, self._rng)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def _fire(self, key: K) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None and timer[2]:
            self.add_poll(key)
        else:
            self.add(key)

    def _notify(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def get(self) -> K:
        while True:
            while not (self._urgent or self._soon or self._ready or self._polls):
                if self._shutdown:
                    raise ShutDown
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except asyncio.CancelledError:
                    # A wake-up meant for this worker must not be lost with it.
                    if waiter.done() and not waiter.cancelled():
                        self._notify()
                    raise
            key = self._next_key()
            if key in self._dirty and key not in self._processing:
                break  # else a stale copy: handed out already through another deque
        self._waiting -= 1
        self._polling.discard(key)
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def _next_key(self) -> K:
        ahead = self._urgent or self._soon or self._ready
        if self._polls and (
            not ahead
            or (not self._last_was_poll and self._clock() - self._polls[0][1] >= self.poll_max_wait_s)
        ):
            # A copy whose key moved up is handed out here if it comes first: only sooner.
            self._last_was_poll = True
            return self._polls.popleft()[0]
        self._last_was_poll = False
        return ahead.popleft()

    def done(self, key: K) -> None:
        self._processing.discard(key)
        lane = self._ahead_when_done.pop(key, self._ready)
        if key in self._dirty:
            lane.append(key)
            self._waiting += 1
            self._notify()

    def shut_down(self) -> None:
        self._shutdown = True
        for _, handle, _poll in self._timers.values():
            handle.cancel()
        self._timers.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
