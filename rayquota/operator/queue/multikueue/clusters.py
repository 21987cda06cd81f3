"""The worker clusters: one connection per MultiKueueCluster, made, remade (its source changed) or
dropped (deleted) as the objects say, and each object's ``Active`` condition saying whether the
manager is connected to it (``kubectl get multikueueclusters``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rayquota.api.multikueue_v1alpha1 import CLUSTER_ACTIVE
from rayquota.operator.core import Informer, Manager, ObjectKey, Result
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.queue.multikueue.worker import WorkerConnection, WorkerResources
from rayquota.operator.ray.vocabulary import conditions

log = logging.getLogger(__name__)


class WorkerClusters:
    def __init__(
        self,
        manager: Manager,
        settings: MultiKueueSettings,
        clusters: Informer,
        resources: WorkerResources,
        on_remote_change: Callable[[ObjectKey], None],
        on_state_change: Callable[[str], None],
    ) -> None:
        self.manager = manager
        self.settings = settings
        self.clusters = clusters
        self.resources = resources
        self.on_remote_change = on_remote_change
        self.on_state_change = on_state_change
        self.connections: dict[str, WorkerConnection] = {}
        self.controller = manager.controller("multikueue-clusters", self.reconcile, workers=1)
        self.controller.watch(clusters)
        manager.on_shutdown(self.stop_all)

    def get(self, name: str) -> WorkerConnection | None:
        return self.connections.get(name)

    def connected(self) -> list[WorkerConnection]:
        return [c for c in self.connections.values() if c.connected]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        obj = self.clusters.store.get("", key.name)
        connection = self.connections.get(key.name)
        if obj is None:
            if connection is not None:
                del self.connections[key.name]
                await connection.stop()
                self.on_state_change(key.name)
            return None
        source: dict[str, Any] = dict((obj.get("spec") or {}).get("clusterSource") or {})
        if connection is None or connection.cluster_source != source:
            if connection is not None:
                await connection.stop()
            connection = WorkerConnection(
                key.name,
                source,
                local=self.manager.client,
                settings=self.settings,
                resources=self.resources,
                scope=self.manager.scope,
                on_change=self.on_remote_change,
                on_state=self._state_changed,
            )
            self.connections[key.name] = connection
            connection.start()
        previous = dict(obj.get("status") or {})
        conds = conditions.set_condition(
            list(previous.get("conditions") or []),
            CLUSTER_ACTIVE,
            connection.connected,
            connection.reason,
            connection.message,
            now=now_rfc3339(),
            observed_generation=obj["metadata"].get("generation"),
        )
        await self.manager.status.write(self.clusters.resource, obj, {**previous, "conditions": conds})
        return None

    def _state_changed(self, name: str) -> None:
        self.controller.enqueue(ObjectKey("", name))
        self.on_state_change(name)

    async def stop_all(self) -> None:
        for connection in list(self.connections.values()):
            await connection.stop()
        self.connections.clear()
