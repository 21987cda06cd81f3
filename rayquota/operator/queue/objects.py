"""Finding, in the watch-fed caches, the queued objects, their children, pods and Workloads.

A queued object is one of the registered kinds (`adapters.ADAPTERS`) that names a queue (of the
kinds the configuration turns on, `adapters.registry`: only those are watched). An
object whose controller owner is a kind its record is accounted through (a RayCluster owned by
a RayJob or RayService, a RayJob's submitter Job) is never queued on its own: it is a *child*,
accounted through its parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.api.multikueue_v1alpha1 import PREBUILT_WORKLOAD_LABEL
from rayquota.operator.core import Informer, Manager, ObjectKey, owner_uids
from rayquota.operator.core import resources as core_resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, CLUSTER_KIND, KindAdapter, PodWatch, pod_watches
from rayquota.operator.queue.dra.context import ClaimSource
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi
from rayquota.operator.ray.raycluster.redis_cleanup import REDIS_CLEANUP_FINALIZER
from rayquota.operator.ray.vocabulary import labels

RESOURCE_OF_KIND: dict[str, Resource] = {kind: adapter.resource for kind, adapter in ADAPTERS.items()}
# The kinds whose RayClusters are their children.
PARENT_KINDS = ADAPTERS[CLUSTER_KIND].accounted_through
OWNER_INDEX = "queue-owner"
WORKLOAD_INDEX = "queue-workload"
POD_INDEX = "queue-pods"
# A pod index entry: (pod watch name, "namespace/value").
PodKey = tuple[str, str]
# What many Workloads hold equal (one spec per shape and queue, one admission per shape and
# ClusterQueue): the caches keep one copy of each (core/cache/compact.py).
WORKLOAD_SHARED_PATHS = (("spec",), ("status", "admission"))


@dataclass(frozen=True)
class Queued:
    """A queued object, its adapter and its Workload's key."""

    kind: str
    obj: Obj
    adapter: KindAdapter
    workload: ObjectKey


def controller_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def accounted_elsewhere(kind: str, obj: Mapping[str, Any]) -> bool:
    """Is ``obj`` accounted through its controller owner (a child, never queued alone)?"""
    owner = controller_owner(obj)
    return owner is not None and owner.get("kind") in ADAPTERS[kind].accounted_through


def is_child(cluster: Mapping[str, Any]) -> bool:
    return accounted_elsewhere(CLUSTER_KIND, cluster)


def workload_key(kind: str, obj: Mapping[str, Any]) -> ObjectKey:
    """Named after the object (and its uid), or, for a copy a MultiKueue manager created in this
    worker, the Workload the manager made first (Kueue's prebuilt Workload)."""
    meta = obj["metadata"]
    prebuilt = (meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL)
    # A child copies its parent's labels (KubeRay's RayJob cluster does): the label names the
    # parent's Workload, never the child's.
    if prebuilt and not accounted_elsewhere(kind, obj):
        return ObjectKey(str(meta["namespace"]), str(prebuilt))
    return ObjectKey(str(meta["namespace"]), naming.workload_name(kind, str(meta["name"]), str(meta["uid"])))


@dataclass
class QueueObjects:
    """The caches the queue integration reads, with the indexes that link them."""

    settings: naming.QueueSettings
    informers: dict[str, Informer]
    workloads: Informer
    # pod watch name -> its informer (`PodWatch`: a filtered pod informer per way of finding pods)
    pod_informers: dict[str, Informer]
    # namespace -> creationTimestamp of its LocalQueue "default" (manageJobsWithoutQueueName)
    default_queues_since: dict[str, str] = field(default_factory=dict)
    api: QueueApi = RAYQUOTA
    # The integration records of the mode it runs in (`adapters.registry`): beside KubeRay's
    # operator a RayService's children are held at their pods. Their demand reads count the
    # DRA claims of ``claims``.
    adapters: Mapping[str, KindAdapter] = field(default_factory=lambda: ADAPTERS)
    # The claim source (queue/dra/cache.py) the records were built with: the quantity check, the
    # gate and the caps read claim templates and DeviceClasses from it too. None: nothing read.
    claims: ClaimSource | None = None

    @classmethod
    def register(
        cls,
        manager: Manager,
        settings: naming.QueueSettings,
        api: QueueApi = RAYQUOTA,
        adapters: Mapping[str, KindAdapter] = ADAPTERS,
        claims: ClaimSource | None = None,
    ) -> QueueObjects:
        informers = {
            kind: manager.informer(RESOURCE_OF_KIND[kind], indexers={OWNER_INDEX: owner_uids})
            for kind in adapters
        }
        pod_informers = {
            # The RayCluster pods' informer is the RayCluster reconciler's too (same selector).
            watch.name: manager.informer(
                core_resources.PODS,
                label_selector=watch.selector,
                indexers={POD_INDEX: watch.index, OWNER_INDEX: owner_uids},
            )
            for watch in pod_watches(adapters)
        }
        objects = cls(
            settings,
            informers,
            manager.informer(
                api.workloads,
                indexers={OWNER_INDEX: owner_uids},
                shared_paths=WORKLOAD_SHARED_PATHS,
                interned=True,
            ),
            pod_informers,
            api=api,
            adapters=adapters,
            claims=claims,
        )
        for kind, informer in informers.items():
            informer.store.add_indexer(WORKLOAD_INDEX, objects._workload_index(kind))
        return objects

    @property
    def holds_pods(self) -> bool:
        """Does a record of this mode hold its children at their pods (the pod webhook's gate)?"""
        return any(adapter.children_held_at_pods for adapter in self.adapters.values())

    def _workload_index(self, kind: str) -> Any:
        def index(obj: Mapping[str, Any]) -> list[str]:
            if self.queue_name(kind, obj) is None and not self._has_workload(kind, obj):
                return []
            return [str(workload_key(kind, obj))]

        return index

    def _has_workload(self, kind: str, obj: Mapping[str, Any]) -> bool:
        key = workload_key(kind, obj)
        return self.workloads.store.get(key.namespace, key.name) is not None

    # --- queued objects -----------------------------------------------------------------------

    def queue_name(self, kind: str, obj: Mapping[str, Any]) -> str | None:
        """None also for a kind the configuration leaves off (an optional integration)."""
        if kind not in self.adapters or accounted_elsewhere(kind, obj):
            return None
        return naming.queue_name_of(obj, self.settings, self.default_queues_since)

    def queued(self, kind: str, obj: Obj) -> Queued | None:
        if self.queue_name(kind, obj) is None:
            return None
        return Queued(kind, obj, self.adapters[kind], workload_key(kind, obj))

    def owner_of_workload(self, key: ObjectKey) -> Queued | None:
        """The queued object a Workload stands for (found through the index, not the Workload,
        so a Workload still to be created is found too)."""
        for kind, informer in self.informers.items():
            for obj in informer.store.by_index(WORKLOAD_INDEX, str(key)):
                return Queued(kind, obj, self.adapters[kind], key)
        return None

    def queued_owner(self, kind: str, obj: Mapping[str, Any]) -> Queued | None:
        """The queued object whose quota ``obj`` runs on: itself, or the owner it is accounted
        through."""
        owner = controller_owner(obj)
        if owner is not None and owner.get("kind") in ADAPTERS[kind].accounted_through:
            parent_kind = str(owner["kind"])
            parent = self.cached(parent_kind, str(obj["metadata"]["namespace"]), str(owner["name"]))
            if parent is None or parent["metadata"].get("uid") != owner.get("uid"):
                return None
            return self.queued(parent_kind, parent)
        return self.queued(kind, dict(obj))

    def queued_owner_of_cluster(self, cluster: Mapping[str, Any]) -> Queued | None:
        return self.queued_owner(CLUSTER_KIND, cluster)

    def parent_unknown(self, cluster: Mapping[str, Any]) -> bool:
        """A child whose parent (RayJob, RayService) the cache does not show: it may be queued,
        so nothing of it may run until the parent is seen."""
        owner = controller_owner(cluster)
        if owner is None or owner.get("kind") not in PARENT_KINDS:
            return False
        parent = self.informers[str(owner["kind"])].store.get(
            str(cluster["metadata"]["namespace"]), str(owner["name"])
        )
        return parent is None or parent["metadata"].get("uid") != owner.get("uid")

    def children(self, kind: str, obj: Mapping[str, Any]) -> list[Obj]:
        child_kind = ADAPTERS[kind].child_kind
        if child_kind is None:
            return []
        uid = str(obj["metadata"]["uid"])
        return [
            c
            for c in self.informers[child_kind].store.by_index(OWNER_INDEX, uid)
            if accounted_elsewhere(child_kind, c)
        ]

    def redis_cleanup_pending(self, namespace: str, parts: Iterable[str]) -> bool:
        """Is one of these clusters being deleted with its Redis cleanup still to run? The cleanup
        Job's pod starts only once the head is gone, on the head's quota: until the finalizer
        is off, the quota is not free even when no pod is left for a moment."""
        store = self.informers[CLUSTER_KIND].store
        for name in parts:
            cluster = store.get(namespace, name)
            meta = (cluster or {}).get("metadata") or {}
            if meta.get("deletionTimestamp") and REDIS_CLEANUP_FINALIZER in (meta.get("finalizers") or []):
                return True
        return False

    def pods_by_part(
        self,
        queued: Queued,
        children: list[Obj],
        known: Iterable[str] = (),
        lookup: RecordingLookup | None = None,
    ) -> dict[str, list[Obj]]:
        """Pods of each part (a cluster, by name), read from the pod caches. ``known`` adds
        parts seen earlier whose pods may outlive them; ``lookup`` records where it looked."""
        return queued.adapter.pods_by_part(lookup or self, queued.obj, children, list(known))

    def pods(self, watch: PodWatch, namespace: str, value: str) -> list[Obj]:
        return self.pods_at((watch.name, f"{namespace}/{labels.label_value(value)}"))

    def pods_at(self, key: PodKey) -> list[Obj]:
        return self.pod_informers[key[0]].store.by_index(POD_INDEX, key[1])

    def pod_owner(self, watch: PodWatch, pod: Mapping[str, Any]) -> Obj | None:
        """The object of ``watch.owner_kind`` the pod's index label names, if cached."""
        keys = watch.index(pod)
        if not keys:
            return None
        namespace, _, name = keys[0].partition("/")
        return self.cached(watch.owner_kind, namespace, name)

    def cached(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The cached object, or None (a kind the configuration leaves off is not watched)."""
        informer = self.informers.get(kind)
        return None if informer is None else informer.store.get(namespace, name)

    def pods_owned_by(self, owner_uids: Iterable[str]) -> list[Obj]:
        """Pods of the given owners: directly (a RayCluster, a Job) or through the clusters
        they own."""
        pods: list[Obj] = []
        for uid in owner_uids:
            owned = [uid] + [
                str(c["metadata"]["uid"])
                for c in self.informers[CLUSTER_KIND].store.by_index(OWNER_INDEX, uid)
            ]
            for informer in self.pod_informers.values():
                for owner in owned:
                    pods += informer.store.by_index(OWNER_INDEX, owner)
        return pods

    def controlled_by(self, kind: str, owner: Mapping[str, Any]) -> list[Obj]:
        """The cached objects of ``kind`` whose controller owner is ``owner`` (by its uid)."""
        informer = self.informers.get(kind)
        if informer is None:
            return []
        uid = str(owner["metadata"]["uid"])
        return [
            obj
            for obj in informer.store.by_index(OWNER_INDEX, uid)
            if str((controller_owner(obj) or {}).get("uid")) == uid
        ]

    def workload(self, key: ObjectKey) -> Obj | None:
        return self.workloads.store.get(key.namespace, key.name)

    def workload_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        """The Workload (``namespace/name``) a pod's resources count in, if it belongs to a
        queued object: through the owner its kind's pod watches find it by (a RayCluster, a
        RayJob's submitter, a Job)."""
        for watch in pod_watches(self.adapters):
            if not watch.matches(pod):
                continue
            owner = self.pod_owner(watch, pod)
            queued = self.queued_owner(watch.owner_kind, owner) if owner is not None else None
            if queued is not None:
                return str(queued.workload)
        return None


class RecordingLookup:
    """The pod caches, remembering every index key looked up (see :class:`PodLookups`)."""

    def __init__(self, objects: QueueObjects) -> None:
        self.objects = objects
        self.looked_up: set[PodKey] = set()

    def pods(self, watch: PodWatch, namespace: str, value: str) -> list[Obj]:
        key = (watch.name, f"{namespace}/{labels.label_value(value)}")
        self.looked_up.add(key)
        return self.objects.pods_at(key)


@dataclass
class PodLookups:
    """Where each Workload last found its pods: a pod event maps to the Workloads that count it
    even once its owner (a deleted cluster, a RayJob, a Job) is gone, and a deleted object's
    quota is held until the pods found there are gone."""

    of_workload: dict[ObjectKey, set[PodKey]] = field(default_factory=dict)
    by_key: dict[PodKey, set[ObjectKey]] = field(default_factory=dict)

    def record(self, workload: ObjectKey, keys: set[PodKey]) -> None:
        self.forget(workload)
        self.of_workload[workload] = keys
        for key in keys:
            self.by_key.setdefault(key, set()).add(workload)

    def workloads(self, key: PodKey) -> list[ObjectKey]:
        return sorted(self.by_key.get(key, ()), key=str)

    def keys_of(self, workload: ObjectKey) -> set[PodKey]:
        return self.of_workload.get(workload, set())

    def forget(self, workload: ObjectKey) -> None:
        for key in self.of_workload.pop(workload, set()):
            holders = self.by_key.get(key)
            if holders is not None:
                holders.discard(workload)
                if not holders:
                    del self.by_key[key]
