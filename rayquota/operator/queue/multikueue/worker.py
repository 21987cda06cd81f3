"""The manager's connection to one worker cluster: a client from its kubeconfig, watch-fed caches
of what the manager made there (the copies of Workloads, the objects, filtered by the origin
label), and whether the worker answers.

A worker is connected once its caches have listed; it is lost when its API server stops
answering (a probe every ``probe_interval_s``, each allowed ``probe_timeout_s``), and
``lost_since`` says since when. A lost connection drops its caches (nothing stale is read) and
is made again, with backoff, from the kubeconfig read afresh.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.multikueue_v1alpha1 import ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from rayquota.operator.core import Informer, NamespaceScope, ObjectKey
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.cancellation import stop_if_cancelled
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.multikueue.kubeconfig import WorkerConfigError, client_of, kubeconfig_text
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.queue.objects import accounted_elsewhere

log = logging.getLogger(__name__)

PREBUILT_INDEX = "multikueue-workload"
SYNC_TIMEOUT_S = 60.0
# A lost worker is tried again at least this often: its return ends the window in which its stale
# copies may still run (docs/multicluster.md), so it is noticed within seconds.
MAX_BACKOFF_S = 5.0
WORKLOADS = "Workload"
LOCAL_QUEUES, CLUSTER_QUEUES = "LocalQueue", "ClusterQueue"


@dataclass(frozen=True)
class WorkerResources:
    """What is watched in a worker: the Workloads and each dispatched kind (the manager's copies
    only), and with ``queues`` the LocalQueues and ClusterQueues (for the free quota)."""

    workloads: Resource
    kinds: Mapping[str, Resource]
    local_queues: Resource
    cluster_queues: Resource
    queues: bool = False


def _prebuilt_index(obj: Mapping[str, Any]) -> list[str]:
    name = (obj["metadata"].get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL)
    return [f"{obj['metadata'].get('namespace')}/{name}"] if name else []


class WorkerConnection:
    def __init__(
        self,
        name: str,
        cluster_source: Mapping[str, Any],
        *,
        local: KubeClient,
        settings: MultiKueueSettings,
        resources: WorkerResources,
        scope: NamespaceScope,
        on_change: Callable[[ObjectKey], None],
        on_state: Callable[[str], None],
    ) -> None:
        self.name = name
        self.cluster_source = dict(cluster_source)
        self.local = local
        self.settings = settings
        self.resources = resources
        self.scope = scope
        self.on_change = on_change
        self.on_state = on_state
        self.connected = False
        # Kueue's rule: a worker never seen counts as lost since the manager started looking.
        self.lost_since: float | None = time.time()
        self.reason, self.message = "Connecting", "connecting to the worker's API server"
        self.client: KubeClient | None = None
        self.informers: dict[str, Informer] = {}
        self._task: asyncio.Task[None] | None = None

    # --- reading --------------------------------------------------------------------------

    def workload(self, key: ObjectKey) -> Obj | None:
        informer = self.informers.get(WORKLOADS)
        return informer.store.get(key.namespace, key.name) if informer is not None else None

    def workloads(self) -> list[Obj]:
        informer = self.informers.get(WORKLOADS)
        return informer.store.list() if informer is not None else []

    def objects_of(self, key: ObjectKey, *, children: bool = False) -> list[tuple[str, Obj]]:
        """The objects of ours there that run under the Workload ``key``; with ``children`` also
        those made from them there (a RayJob's cluster carries its labels)."""
        return [
            (kind, obj)
            for kind in self.resources.kinds
            if kind in self.informers
            for obj in self.informers[kind].store.by_index(PREBUILT_INDEX, str(key))
            if children or not accounted_elsewhere(kind, obj)
        ]

    def objects(self) -> list[tuple[str, Obj]]:
        return [(kind, obj) for kind in self.resources.kinds for obj in self._list(kind)]

    def object(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.informers.get(kind)
        return informer.store.get(namespace, name) if informer is not None else None

    def queues(self) -> tuple[list[Obj], dict[str, Obj]]:
        """The worker's LocalQueues, and its ClusterQueues by name."""
        queues = {str(cq["metadata"]["name"]): cq for cq in self._list(CLUSTER_QUEUES)}
        return self._list(LOCAL_QUEUES), queues

    def _list(self, kind: str) -> list[Obj]:
        informer = self.informers.get(kind)
        return informer.store.list() if informer is not None else []

    # --- running --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"multikueue worker {self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._connect_and_watch()
                failures = 0
            except asyncio.CancelledError:
                raise
            except WorkerConfigError as exc:
                self._lost(exc.reason, str(exc))
            except Exception as exc:  # refused, timed out, TLS, auth: all say "not reachable"
                stop_if_cancelled(exc)  # told to stop while a request timed out
                self._lost("ClientConnectionFailed", f"{type(exc).__name__}: {exc}"[:1000])
            failures += 1
            delay = min(MAX_BACKOFF_S, 0.5 * 2 ** min(failures, 6)) * (0.75 + random.random() / 2)
            await asyncio.sleep(delay)

    async def _connect_and_watch(self) -> None:
        text = await kubeconfig_text(
            self.local, self.cluster_source, self.settings.namespace, self.settings.kubeconfig_path_prefix
        )
        client = client_of(text, timeout_s=max(10.0, self.settings.probe_timeout_s * 2))
        tasks: list[asyncio.Task[None]] = []
        try:
            await self._probe(client)
            informers = self._informers(client)
            tasks = [asyncio.create_task(i.run(), name=f"{self.name} {i!r}") for i in informers.values()]
            await asyncio.wait_for(
                asyncio.gather(*(i.synced.wait() for i in informers.values())), SYNC_TIMEOUT_S
            )
            self.client, self.informers = client, informers
            self._connected()
            while True:
                await asyncio.sleep(self.settings.probe_interval_s)
                await self._probe(client)
                stop_if_cancelled()  # a probe's wait_for may have taken the cancellation
        finally:
            if self.connected:  # first: no reader may take the emptied caches for the worker's
                self._lost("ClientConnectionFailed", "the connection ended")
            self.informers, self.client = {}, None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()

    async def _probe(self, client: KubeClient) -> None:
        await asyncio.wait_for(client.request("GET", "/version"), self.settings.probe_timeout_s)

    def _informers(self, client: KubeClient) -> dict[str, Informer]:
        selector = f"{ORIGIN_LABEL}={self.settings.origin}"
        informers = {
            WORKLOADS: Informer(client, self.resources.workloads, self.scope, label_selector=selector)
        }
        for kind, resource in self.resources.kinds.items():
            informers[kind] = Informer(
                client,
                resource,
                self.scope,
                label_selector=selector,
                indexers={PREBUILT_INDEX: _prebuilt_index},
            )
        if self.resources.queues:
            informers[LOCAL_QUEUES] = Informer(client, self.resources.local_queues, self.scope)
            informers[CLUSTER_QUEUES] = Informer(client, self.resources.cluster_queues, self.scope)
        informers[WORKLOADS].on_change(self._workload_changed)
        for kind in self.resources.kinds:
            informers[kind].on_change(self._object_changed)
        return informers

    def _workload_changed(self, _event: str, obj: Obj, _old: Obj | None) -> None:
        self.on_change(ObjectKey.of(obj))

    def _object_changed(self, _event: str, obj: Obj, _old: Obj | None) -> None:
        for key in _prebuilt_index(obj):
            namespace, _, name = key.partition("/")
            self.on_change(ObjectKey(namespace, name))

    def _connected(self) -> None:
        was = self.connected
        self.connected, self.lost_since = True, None
        self.reason, self.message = "Active", "Connected"
        log.info("multikueue: worker %s connected", self.name)
        if not was:
            self.on_state(self.name)

    def _lost(self, reason: str, message: str) -> None:
        was = self.connected
        self.connected = False
        if self.lost_since is None:
            self.lost_since = time.time()
        changed = (reason, message) != (self.reason, self.message)
        self.reason, self.message = reason, message
        if was:
            log.warning("multikueue: worker %s lost: %s", self.name, message)
        if was or changed:
            self.on_state(self.name)
