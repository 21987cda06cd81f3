"""The manager: one client, shared informers, the controllers, the event recorder.

Components register in their `setup(manager, ...)` (wired in `rayquota.operator.components`); `run`
starts the informers, waits until each has listed once, then starts the controllers, and stops
everything when told to.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from rayquota.operator.core.cache.compact import Path
from rayquota.operator.core.cache.informer import Informer
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cache.store import Indexer
from rayquota.operator.core.controller import Controller, Reconcile
from rayquota.operator.core.events import EventRecorder
from rayquota.operator.core.gate import AdmissionGate, NoGate
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.status import StatusWriter
from rayquota.operator.kube import KubeClient, decode_json

log = logging.getLogger(__name__)

# How long a stop waits for each shutdown hook, and for the cancelled tasks.
SHUTDOWN_STEP_S = 15.0

Runnable = Callable[[], Coroutine[Any, Any, None]]


def _name(hook: Runnable) -> str:
    return str(getattr(hook, "__qualname__", None) or hook)


class Manager:
    def __init__(
        self,
        client: KubeClient,
        scope: NamespaceScope,
        *,
        workers: int = 4,
        resync_interval_s: float = 600.0,
        sync_timeout_s: float = 120.0,
    ) -> None:
        self.client = client
        self.scope = scope
        self.workers = workers
        self.resync_interval_s = resync_interval_s
        self.sync_timeout_s = sync_timeout_s
        self.recorder = EventRecorder(client)
        self.status = StatusWriter(client)
        self.gate: AdmissionGate = NoGate()
        self.ready = asyncio.Event()
        self._informers: dict[tuple[Resource, str | None, str | None], Informer] = {}
        self._controllers: list[Controller] = []
        self._runnables: list[tuple[str, Runnable]] = []
        self._shutdown_hooks: list[Runnable] = []

    # --- registration ----------------------------------------------------------------------------

    def informer(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
        shared_paths: Iterable[Path] = (),
        interned: bool = False,
    ) -> Informer:
        """The shared informer for a resource and selectors (created on first use);
        ``shared_paths``: subtrees its objects often hold equal (cached once, ``cache/compact.py``);
        ``interned``: keys and short values interned as they are decoded (many objects alike)."""
        key = (resource, label_selector, field_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client,
                resource,
                self.scope,
                label_selector=label_selector,
                field_selector=field_selector,
            )
            informer.on_change(self.status.observe)
            self._informers[key] = informer
        for name, indexer in (indexers or {}).items():
            informer.store.add_indexer(name, indexer)
        informer.compact.add_paths(shared_paths)
        if interned:
            informer.decode = decode_json
        return informer

    def controller(self, name: str, reconcile: Reconcile, *, workers: int | None = None) -> Controller:
        controller = Controller(name, reconcile, workers=workers or self.workers)
        self._controllers.append(controller)
        return controller

    def add_runnable(self, name: str, runnable: Runnable) -> None:
        """A long-running task started with the controllers and cancelled at shutdown."""
        self._runnables.append((name, runnable))

    def on_shutdown(self, hook: Runnable) -> None:
        self._shutdown_hooks.append(hook)

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    @property
    def controllers(self) -> list[Controller]:
        return list(self._controllers)

    # --- running ---------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        # After an outage the keys that failed for it are tried again at once (reachability.py).
        self.client.reachability.on_back(self._retry_unanswered)
        tasks = [asyncio.create_task(i.run(), name=f"informer {i!r}") for i in self._informers.values()]
        tasks.append(asyncio.create_task(self.recorder.run(), name="event recorder"))
        try:
            if not await self._wait_synced(stop):
                return
            for controller in self._controllers:
                controller.start()
            tasks += [asyncio.create_task(r(), name=name) for name, r in self._runnables]
            tasks.append(asyncio.create_task(self._resync_forever(), name="resync"))
            self.ready.set()
            # An optional kind whose CRD is not installed counts as synced and empty; it is
            # named apart, so the count says how many resources the operator lists and watches.
            absent = [str(i.resource) for i in self._informers.values() if not i.served]
            log.info(
                "operator ready: %d informers synced, %d controllers%s",
                len(self._informers) - len(absent),
                len(self._controllers),
                f"; not served (CRD not installed), watched for: {', '.join(absent)}" if absent else "",
            )
            failed = asyncio.create_task(self._first_failure(tasks))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({failed, stopping}, return_when=asyncio.FIRST_COMPLETED)
            failed.cancel()
            stopping.cancel()
            if failed.done() and not failed.cancelled() and failed.exception() is not None:
                raise failed.exception()  # type: ignore[misc]
        finally:
            self.ready.clear()
            await asyncio.gather(*(c.stop() for c in self._controllers))
            log.info("controllers stopped")
            for hook in self._shutdown_hooks:
                try:
                    await asyncio.wait_for(hook(), SHUTDOWN_STEP_S)
                except TimeoutError:
                    # A stop must end: a hook that hangs (a connection's task that swallowed its
                    # cancellation, say) is left behind with a warning, not waited on for ever.
                    log.warning(
                        "shutdown: %s did not finish in %.0fs; going on", _name(hook), SHUTDOWN_STEP_S
                    )
                except Exception:
                    log.exception("a shutdown hook failed")
            for task in tasks:
                task.cancel()
            if tasks:
                _, unfinished = await asyncio.wait(tasks, timeout=SHUTDOWN_STEP_S)
                if unfinished:
                    names = sorted(t.get_name() for t in unfinished)
                    log.warning("shutdown: tasks still running after %.0fs: %s", SHUTDOWN_STEP_S, names)
            await self.recorder.drain()

    def _retry_unanswered(self) -> None:
        for controller in self._controllers:
            controller.retry_unanswered()

    async def _wait_synced(self, stop: asyncio.Event) -> bool:
        waits = [asyncio.create_task(i.synced.wait()) for i in self._informers.values()]
        stopping = asyncio.create_task(stop.wait())
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.sync_timeout_s
            pending = set(waits)
            while pending:
                done, pending = await asyncio.wait(
                    pending | {stopping},
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                pending.discard(stopping)
                if stopping in done:
                    return False
                if not done:
                    missing = [repr(i) for i in self._informers.values() if not i.synced.is_set()]
                    raise TimeoutError(
                        f"caches not synced after {self.sync_timeout_s}s: {', '.join(missing)}"
                    )
            return True
        finally:
            stopping.cancel()
            for wait in waits:
                wait.cancel()

    async def _first_failure(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Return (raise) when any background task ends: they are meant to run for ever."""
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise RuntimeError(f"{task.get_name()} failed") from task.exception()
            raise RuntimeError(f"{task.get_name()} ended unexpectedly")

    async def _resync_forever(self) -> None:
        """The long resync: every object is looked at again now and then, in case an event was lost."""
        while True:
            await asyncio.sleep(self.resync_interval_s * (0.9 + 0.2 * random.random()))
            for controller in self._controllers:
                controller.resync()
