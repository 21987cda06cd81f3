"""What the dashboard reads: informers on the operator's shared ``Manager`` (one watch per
resource, shared with the operator's controllers when it runs inside the operator), and a
version number that moves on every change so live pages know when to look again.

The queue configuration also feeds a copy of the admission engine through the operator's own
event handlers (:class:`AdmissionLoop`), and the Workloads that changed are noted, so a queue
snapshot applies only what moved to that copy (:mod:`.queue_model`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core import Informer, Manager, label_indexer, owner_uids, resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.adapters import ADAPTERS, KindAdapter, registry
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.driver import IgnoredDecisions
from rayquota.operator.queue.dra.context import ClaimSource
from rayquota.operator.queue.kueue.api_group import QueueApi
from rayquota.operator.queue.objects import RESOURCE_OF_KIND, WORKLOAD_SHARED_PATHS
from rayquota.operator.ray.vocabulary import labels
from rayquota.queueing.quota.fairsharing import FairSharing

OWNER_INDEX = "dashboard-owner"
CLUSTER_INDEX = "dashboard-cluster"
INVOLVED_INDEX = "dashboard-involved"
OWNER_NAME_INDEX = "dashboard-owner-name"
"""Workloads by ``namespace/kind/name`` of the Ray object they stand for."""


def involved_uid(event: Mapping[str, Any]) -> list[str]:
    uid = (event.get("involvedObject") or event.get("regarding") or {}).get("uid")
    return [str(uid)] if uid else []


def workload_owner(workload: Mapping[str, Any]) -> list[str]:
    meta = workload["metadata"]
    refs = meta.get("ownerReferences") or []
    if not refs:
        return []
    return [f"{meta.get('namespace')}/{refs[0].get('kind')}/{refs[0].get('name')}"]


class Changes:
    """A number that grows on every cache change, and a way to wait for it to grow."""

    def __init__(self) -> None:
        self.version = 0
        self._moved = asyncio.Event()

    def touch(self, *_args: Any) -> None:
        self.version += 1
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def wait_past(self, version: int, timeout_s: float) -> bool:
        """True once the version is past ``version``; False after ``timeout_s`` without change."""
        if self.version > version:
            return True
        try:
            await asyncio.wait_for(self._moved.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


@dataclass
class DashboardCache:
    api: QueueApi
    flavors: Informer
    cohorts: Informer
    cluster_queues: Informer
    local_queues: Informer
    workloads: Informer
    priority_classes: Informer
    namespaces: Informer
    ray: dict[str, Informer]
    """kind -> informer, for every Ray kind the queue integration knows (RESOURCE_OF_KIND)."""
    pods: Informer
    events: Informer
    config: AdmissionLoop
    """Its configuration handlers keep the copy's engine configured as the operator's is; the
    queue model loads the Workloads into it and runs its cycles (its loop never runs)."""
    records: Mapping[str, KindAdapter] = field(default_factory=lambda: ADAPTERS)
    """The records the Workload page reads a Ray object's demand with: beside the operator, built
    with its claim source, so a slice counts the DRA devices its Workload's pod sets do."""
    changes: Changes = field(default_factory=Changes)
    queue_version: int = 0
    """Moves only with what the engine reads (queue configuration, Workloads, namespaces,
    priority classes): pods and events churn without costing a queue snapshot."""
    priority_version: int = 0
    changed_workloads: set[str] = field(default_factory=set)
    """``namespace/name`` of the Workloads added, changed or deleted since the queue model last
    took them (:meth:`take_changed_workloads`)."""

    @classmethod
    def register(
        cls,
        manager: Manager,
        api: QueueApi,
        *,
        fair_sharing: bool | FairSharing | None = False,
        claims: ClaimSource | None = None,
    ) -> DashboardCache:
        """`fair_sharing`: the operator's (its configuration's `fairSharing`), for the queue order;
        `claims`: the operator's claim source (None on its own: no claims are counted)."""
        ray = {
            kind: manager.informer(resource, indexers={OWNER_INDEX: owner_uids})
            for kind, resource in RESOURCE_OF_KIND.items()
        }
        cache = cls(
            api=api,
            flavors=manager.informer(api.resource_flavors),
            cohorts=manager.informer(api.cohorts),
            cluster_queues=manager.informer(api.cluster_queues),
            local_queues=manager.informer(api.local_queues),
            workloads=manager.informer(
                api.workloads,
                indexers={OWNER_NAME_INDEX: workload_owner},
                shared_paths=WORKLOAD_SHARED_PATHS,
                interned=True,
            ),
            priority_classes=manager.informer(api.workload_priority_classes),
            namespaces=manager.informer(resources.NAMESPACES),
            ray=ray,
            # The operator's pod informer has this selector too: inside the operator, one watch.
            pods=manager.informer(
                resources.PODS,
                label_selector=labels.RAY_CLUSTER,
                indexers={CLUSTER_INDEX: label_indexer(labels.RAY_CLUSTER), OWNER_INDEX: owner_uids},
            ),
            events=manager.informer(resources.EVENTS, indexers={INVOLVED_INDEX: involved_uid}),
            config=AdmissionLoop(fair_sharing, IgnoredDecisions()),
            records=registry(beside_kuberay=False, claims=claims),
        )
        for kind, informer in (
            ("ResourceFlavor", cache.flavors),
            ("Cohort", cache.cohorts),
            ("ClusterQueue", cache.cluster_queues),
            ("LocalQueue", cache.local_queues),
        ):
            informer.on_change(cache.config.on_config(kind))
        cache.namespaces.on_change(cache.config.on_namespace)
        cache.priority_classes.on_change(cache.config.on_priority_class)
        cache.priority_classes.on_change(cache._priorities_changed)
        cache.workloads.on_change(cache._workload_changed)
        for informer in cache.queue_informers():
            informer.on_change(cache._queue_changed)
        for informer in cache.informers():
            informer.on_change(cache.changes.touch)
        return cache

    def queue_informers(self) -> list[Informer]:
        return [
            self.flavors,
            self.cohorts,
            self.cluster_queues,
            self.local_queues,
            self.workloads,
            self.priority_classes,
            self.namespaces,
        ]

    def informers(self) -> list[Informer]:
        return [*self.queue_informers(), *self.ray.values(), self.pods, self.events]

    def _queue_changed(self, *_args: Any) -> None:
        self.queue_version += 1

    def _priorities_changed(self, *_args: Any) -> None:
        self.priority_version += 1

    def _workload_changed(self, _event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        meta = obj["metadata"]
        self.changed_workloads.add(f"{meta.get('namespace')}/{meta.get('name')}")

    def take_changed_workloads(self) -> set[str]:
        taken, self.changed_workloads = self.changed_workloads, set()
        return taken

    # --- lookups ---------------------------------------------------------------------------------

    def workload(self, namespace: str, name: str) -> Obj | None:
        return self.workloads.store.get(namespace, name)

    def workload_of(self, kind: str, namespace: str, name: str) -> Obj | None:
        found = self.workloads.store.by_index(OWNER_NAME_INDEX, f"{namespace}/{kind}/{name}")
        return found[0] if found else None

    def ray_object(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.ray.get(kind)
        return informer.store.get(namespace, name) if informer is not None else None

    def owned(self, kind: str, uid: str) -> list[Obj]:
        informer = self.ray.get(kind)
        return informer.store.by_index(OWNER_INDEX, uid) if informer is not None else []

    def pods_of_cluster(self, namespace: str, cluster: str) -> list[Obj]:
        return self.pods.store.by_index(CLUSTER_INDEX, f"{namespace}/{labels.label_value(cluster)}")

    def events_of(self, *uids: str) -> list[Obj]:
        return [event for uid in uids for event in self.events.store.by_index(INVOLVED_INDEX, uid)]

    def namespace_names(self) -> list[str]:
        return sorted(str(ns["metadata"]["name"]) for ns in self.namespaces.store.list())
