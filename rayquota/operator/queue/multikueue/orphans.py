"""Garbage collection in the workers: a copy or an object this manager made there whose Workload
the manager no longer has (it was deleted while the worker was unreachable, or while the manager
was down) is removed. It runs every ``gc_interval_s`` and whenever a worker (re)connects, so
orphans go once both sides are up again, whichever of them restarted."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rayquota.api.multikueue_v1alpha1 import PREBUILT_WORKLOAD_LABEL
from rayquota.operator.core import Informer, ObjectKey
from rayquota.operator.queue.multikueue.clusters import WorkerClusters
from rayquota.operator.queue.multikueue.remote import RemoteWrites
from rayquota.operator.queue.multikueue.worker import WorkerConnection

log = logging.getLogger(__name__)


class OrphanCollector:
    def __init__(
        self, workloads: Informer, workers: WorkerClusters, writes: RemoteWrites, interval_s: float
    ) -> None:
        self.workloads = workloads
        self.workers = workers
        self.writes = writes
        self.interval_s = interval_s
        self.collected = 0
        self._wake: asyncio.Event | None = None

    def wake(self) -> None:
        """A worker connected: collect now."""
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        self._wake = asyncio.Event()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            self._wake.clear()
            for worker in self.workers.connected():
                try:
                    await self.collect(worker)
                except Exception as exc:  # the worker went away meanwhile: next round
                    log.warning("multikueue: collecting orphans in %s failed: %s", worker.name, exc)

    def _known(self, namespace: str, name: str) -> bool:
        found = self.workloads.store.get(namespace, name)
        return found is not None and not found["metadata"].get("deletionTimestamp")

    async def collect(self, worker: WorkerConnection) -> None:
        for copy in worker.workloads():
            key = ObjectKey.of(copy)
            if not self._known(key.namespace, key.name):
                log.info("multikueue: removing the orphan copy %s from %s", key, worker.name)
                self.collected += 1
                await self.writes.remove(worker, key)
        for kind, obj in worker.objects():
            meta = obj["metadata"]
            workload = str((meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL) or "")
            if not self._known(str(meta["namespace"]), workload):
                log.info(
                    "multikueue: removing the orphan %s %s/%s from %s",
                    kind,
                    meta["namespace"],
                    meta["name"],
                    worker.name,
                )
                self.collected += 1
                await self.writes.remove_object(worker, kind, obj)
