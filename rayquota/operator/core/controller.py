"""A controller: a work queue of object keys and workers that reconcile them.

Reconcile functions are level-triggered: they look at the cache, not at the event that woke
them, so missed or repeated wake-ups do no harm.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from rayquota.operator.core.cache.informer import Informer
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.resources import ObjectKey
from rayquota.operator.core.workqueue import ShutDown, WorkQueue
from rayquota.operator.kube import UNREACHABLE, Conflict, NotFound, is_namespace_ending, is_transient

log = logging.getLogger(__name__)

RECONCILES = Counter(
    "rayquota_controller_reconciles_total", "Reconciles by controller and result", ["controller", "result"]
)
RECONCILE_SECONDS = Histogram(
    "rayquota_controller_reconcile_seconds",
    "Time spent in one reconcile",
    ["controller"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
QUEUE_DEPTH = Gauge("rayquota_workqueue_depth", "Keys ready to be reconciled", ["controller"])


class WaitForCache(Exception):
    """Raised by a reconcile whose cache has not yet shown this process's own last write.

    The watch event that brings it re-queues the key; the key's backoff is left as it is."""


# If the awaited watch event never comes (a relist may skip it), look again after this long.
WAIT_FOR_CACHE_RECHECK_S = 10.0


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for: nothing, or another look after `requeue_after_s` seconds.

    `poll`: the look is a poll of something outside Kubernetes that makes no watch events (a
    Ray job's or Serve application's status); it waits behind the keys that watch events and
    steps in motion queued (work queue lanes)."""

    requeue_after_s: float | None = None
    poll: bool = False


Reconcile = Callable[[ObjectKey], Awaitable["Result | None"]]
Mapper = Callable[[Obj], Iterable[ObjectKey]]
ChangeFilter = Callable[[str, Obj, "Obj | None"], bool]  # (event, new, old) -> enqueue?


def own_key(obj: Obj) -> list[ObjectKey]:
    return [ObjectKey.of(obj)]


class ReportedFailure(Exception):
    """A reconcile that failed in a way it has reported on its object already (status, events):
    retried with backoff and logged as a warning with its message, without a traceback."""


class Controller:
    def __init__(self, name: str, reconcile: Reconcile, *, workers: int = 4) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = max(1, workers)
        self.queue: WorkQueue[ObjectKey] = WorkQueue()
        self._primary: list[Informer] = []
        self._tasks: list[asyncio.Task[None]] = []
        # Keys whose last reconcile failed because the API server did not answer.
        self._unanswered: set[ObjectKey] = set()

    def watch(
        self,
        informer: Informer,
        mapper: Mapper = own_key,
        *,
        primary: bool | None = None,
        when: ChangeFilter | None = None,
    ) -> None:
        """Enqueue the keys `mapper` names for every change of the informer's objects (only
        the changes `when(event, new, old)` accepts, if given: controller-runtime's
        predicates, for informers whose most events cannot change what the reconcile does).

        The first informer watched with the default mapper is the primary one: the long
        resync re-enqueues its objects."""
        if primary or (primary is None and mapper is own_key):
            self._primary.append(informer)

        def on_change(kind: str, obj: Obj, old: Obj | None) -> None:
            if when is not None and not when(kind, obj, old):
                return
            keys = set(mapper(obj))
            if old is not None:
                keys.update(mapper(old))
            for key in keys:
                self.queue.add(key)

        informer.on_change(on_change)

    def enqueue(self, key: ObjectKey) -> None:
        self.queue.add(key)

    def enqueue_first(self, key: ObjectKey) -> None:
        self.queue.add_first(key)

    def enqueue_soon(self, key: ObjectKey) -> None:
        self.queue.add_soon(key)

    def enqueue_after(self, key: ObjectKey, delay_s: float) -> None:
        self.queue.add_after(key, delay_s)

    def retry_unanswered(self) -> None:
        """The API server answers again: the keys that failed because it did not are tried now,
        with their backoff forgotten (what an outage built up would otherwise delay the next
        failure's retry, as a 503 while the server still starts, by up to minutes)."""
        for key in self._unanswered:
            self.queue.forget(key)
            self.queue.add(key)
        self._unanswered.clear()

    def resync(self) -> None:
        for informer in self._primary:
            for key in informer.store.object_keys():
                self.queue.add(key)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(), name=f"{self.name}-worker-{i}") for i in range(self.workers)
        ]

    async def stop(self, grace_s: float = 10.0) -> None:
        self.queue.shut_down()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            QUEUE_DEPTH.labels(self.name).set(len(self.queue))
            try:
                await self._reconcile_one(key)
            finally:
                self.queue.done(key)

    async def _reconcile_one(self, key: ObjectKey) -> None:
        started = time.perf_counter()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except WaitForCache:
            self.queue.add_after(key, WAIT_FOR_CACHE_RECHECK_S)
            return
        except Conflict:
            # Someone wrote the object since our cache saw it; its watch event brings the news.
            RECONCILES.labels(self.name, "conflict").inc()
            self.queue.add_rate_limited(key)
            return
        except Exception as exc:
            RECONCILES.labels(self.name, "error").inc()
            delay = self.queue.add_rate_limited(key)
            attempt = self.queue.failures(key)
            if is_transient(exc):
                # The API server did not answer, or said it cannot serve yet (down, restarting,
                # overloaded): expected, and its traceback says nothing; the key is retried with
                # backoff, or as soon as it answers again.
                self._unanswered.add(key)
                log.warning(
                    "%s %s: reconcile failed, %s (attempt %d, retry in %.1fs): %s",
                    self.name,
                    key,
                    "no answer from the API server"
                    if isinstance(exc, UNREACHABLE)
                    else "the API server is not ready",
                    attempt,
                    delay,
                    exc,
                )
            elif is_namespace_ending(exc):
                # A create refused because the namespace is being deleted: the object goes with it.
                log.warning(
                    "%s %s: reconcile failed, its namespace is being deleted: %s", self.name, key, exc
                )
            elif isinstance(exc, NotFound):
                # Deleted since the cache saw it (the object, or one the reconcile writes): the
                # watch brings the deletion, and its traceback says nothing.
                log.warning(
                    "%s %s: reconcile failed, an object is gone (retry in %.1fs): %s",
                    self.name,
                    key,
                    delay,
                    exc,
                )
            elif isinstance(exc, ReportedFailure):
                # Said on the object already (its status, an event): the words are the news.
                log.warning(
                    "%s %s: reconcile failed, reported on the object (attempt %d, retry in %.1fs): %s",
                    self.name,
                    key,
                    attempt,
                    delay,
                    exc,
                )
            elif attempt == 1:
                log.exception("%s %s: reconcile failed; retrying in %.2fs", self.name, key, delay)
            else:
                log.warning(
                    "%s %s: reconcile failed (attempt %d, retrying in %.1fs): %s",
                    self.name,
                    key,
                    attempt,
                    delay,
                    exc,
                )
            return
        finally:
            RECONCILE_SECONDS.labels(self.name).observe(time.perf_counter() - started)
        RECONCILES.labels(self.name, "success").inc()
        self._unanswered.discard(key)
        self.queue.forget(key)
        if result is not None and result.requeue_after_s is not None:
            self.queue.add_after(key, result.requeue_after_s, poll=result.poll)
