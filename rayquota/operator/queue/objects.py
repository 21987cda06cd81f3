"""Finding, in the watch-fed caches, the queued objects, their children, pods and Workloads.

A queued object is a RayJob, RayService or standalone RayCluster that names a queue. A
RayCluster owned by a RayJob or RayService is never queued on its own: it is a *child*,
accounted through its parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core import Informer, Manager, ObjectKey, owner_uids, resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.store import Obj
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, RayAdapter
from rayquota.operator.queue.api_group import RAYQUOTA, QueueApi
from rayquota.operator.ray import labels

PARENT_KINDS = ("RayJob", "RayService")
RESOURCE_OF_KIND: dict[str, Resource] = {
    "RayCluster": resources.RAYCLUSTERS,
    "RayJob": resources.RAYJOBS,
    "RayService": resources.RAYSERVICES,
}
OWNER_INDEX = "queue-owner"
WORKLOAD_INDEX = "queue-workload"
CLUSTER_INDEX = "queue-cluster"
RAYJOB_INDEX = "queue-rayjob"
# What the Job controller labels its pods with (the newer key, and the older one).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"


@dataclass(frozen=True)
class Queued:
    """A queued object, its adapter and its Workload's key."""

    kind: str
    obj: Obj
    adapter: RayAdapter
    workload: ObjectKey


def controller_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def is_child(cluster: Mapping[str, Any]) -> bool:
    owner = controller_owner(cluster)
    return owner is not None and owner.get("kind") in PARENT_KINDS


def workload_key(kind: str, obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj["metadata"]
    return ObjectKey(str(meta["namespace"]), naming.workload_name(kind, str(meta["name"]), str(meta["uid"])))


@dataclass
class QueueObjects:
    """The caches the queue integration reads, with the indexes that link them."""

    settings: naming.QueueSettings
    informers: dict[str, Informer]
    workloads: Informer
    pods: Informer
    # namespace -> creationTimestamp of its LocalQueue "default" (manageJobsWithoutQueueName)
    default_queues_since: dict[str, str] = field(default_factory=dict)
    api: QueueApi = RAYQUOTA
    # The pods of RayJobs' submitter Jobs (K8sJobMode): they hold quota too.
    submitter_pods: Informer | None = None

    @classmethod
    def register(
        cls, manager: Manager, settings: naming.QueueSettings, api: QueueApi = RAYQUOTA
    ) -> QueueObjects:
        informers = {
            kind: manager.informer(resource, indexers={OWNER_INDEX: owner_uids})
            for kind, resource in RESOURCE_OF_KIND.items()
        }
        objects = cls(
            settings,
            informers,
            manager.informer(api.workloads, indexers={OWNER_INDEX: owner_uids}),
            # The same informer the RayCluster reconciler uses (same selector): one watch.
            manager.informer(
                resources.PODS,
                label_selector=labels.RAY_CLUSTER,
                indexers={CLUSTER_INDEX: _cluster_label, OWNER_INDEX: owner_uids},
            ),
            api=api,
            submitter_pods=manager.informer(
                resources.PODS,
                label_selector=f"{labels.RAY_JOB_SUBMITTER}=true",
                indexers={RAYJOB_INDEX: submitter_rayjob_key},
            ),
        )
        for kind, informer in informers.items():
            informer.store.add_indexer(WORKLOAD_INDEX, objects._workload_index(kind))
        return objects

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
        if kind == "RayCluster" and is_child(obj):
            return None
        return naming.queue_name_of(obj, self.settings, self.default_queues_since)

    def queued(self, kind: str, obj: Obj) -> Queued | None:
        if self.queue_name(kind, obj) is None:
            return None
        return Queued(kind, obj, ADAPTERS[kind], workload_key(kind, obj))

    def owner_of_workload(self, key: ObjectKey) -> Queued | None:
        """The queued object a Workload stands for (found through the index, not the Workload,
        so a Workload still to be created is found too)."""
        for kind, informer in self.informers.items():
            for obj in informer.store.by_index(WORKLOAD_INDEX, str(key)):
                return Queued(kind, obj, ADAPTERS[kind], key)
        return None

    def queued_owner_of_cluster(self, cluster: Mapping[str, Any]) -> Queued | None:
        """The queued object whose quota this RayCluster runs on: itself, or its parent."""
        owner = controller_owner(cluster)
        if owner is not None and owner.get("kind") in PARENT_KINDS:
            kind = str(owner["kind"])
            parent = self.informers[kind].store.get(str(cluster["metadata"]["namespace"]), str(owner["name"]))
            if parent is None or parent["metadata"].get("uid") != owner.get("uid"):
                return None
            return self.queued(kind, parent)
        return self.queued("RayCluster", dict(cluster))

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
        if kind == "RayCluster":
            return []
        uid = str(obj["metadata"]["uid"])
        return [c for c in self.informers["RayCluster"].store.by_index(OWNER_INDEX, uid) if is_child(c)]

    def pods_by_part(
        self, queued: Queued, children: list[Obj], known: Iterable[str] = ()
    ) -> dict[str, list[Obj]]:
        """Pods of each part (a cluster, by name), read from the shared pod cache. ``known``
        adds clusters seen earlier whose pods may outlive them."""
        namespace = str(queued.obj["metadata"]["namespace"])
        clusters = [queued.obj] if queued.kind == "RayCluster" else children
        names = [str(c["metadata"]["name"]) for c in clusters]
        if queued.kind == "RayJob" and not names:
            cluster = (queued.obj.get("status") or {}).get("rayClusterName")
            names = [str(cluster)] if cluster else []
        names += [name for name in known if name not in names]
        by_part = {name: self.pods_of_cluster(namespace, name) for name in names}
        if queued.kind == "RayJob":
            meta = queued.obj["metadata"]
            submitters = self.submitter_pods_of(str(meta["namespace"]), str(meta["name"]))
            if submitters:
                # The submitter belongs to the RayJob's one part (named after its cluster, or
                # after the RayJob while it has none).
                part = names[0] if names else str(meta["name"])
                by_part[part] = [*by_part.get(part, []), *submitters]
        return by_part

    @staticmethod
    def submitter_rayjobs(pod: Mapping[str, Any]) -> list[str]:
        """The name of the RayJob a submitter pod ran for."""
        return [key.split("/", 1)[1] for key in submitter_rayjob_key(pod)]

    def submitter_pods_of(self, namespace: str, rayjob: str) -> list[Obj]:
        """The pods of a RayJob's submitter Job (named after the RayJob), found by the Job name
        the Job controller labels them with: they are found even once the Job is gone."""
        if self.submitter_pods is None:
            return []
        return self.submitter_pods.store.by_index(RAYJOB_INDEX, f"{namespace}/{labels.label_value(rayjob)}")

    def pods_of_cluster(self, namespace: str, cluster: str) -> list[Obj]:
        return self.pods.store.by_index(CLUSTER_INDEX, f"{namespace}/{labels.label_value(cluster)}")

    def pods_owned_by(self, owner_uids: Iterable[str]) -> list[Obj]:
        """Pods of the given owners: directly (a RayCluster) or through the clusters they own."""
        pods: list[Obj] = []
        for uid in owner_uids:
            pods += self.pods.store.by_index(OWNER_INDEX, uid)
            for cluster in self.informers["RayCluster"].store.by_index(OWNER_INDEX, uid):
                pods += self.pods.store.by_index(OWNER_INDEX, str(cluster["metadata"]["uid"]))
        return pods

    def workload(self, key: ObjectKey) -> Obj | None:
        return self.workloads.store.get(key.namespace, key.name)

    def workload_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        """The Workload (``namespace/name``) a pod's resources count in, if it belongs to a
        queued object: through its RayCluster, or, for a submitter pod, its RayJob."""
        meta = pod["metadata"]
        namespace = str(meta.get("namespace"))
        pod_labels = meta.get("labels") or {}
        cluster_name = pod_labels.get(labels.RAY_CLUSTER)
        if cluster_name:
            cluster = self.informers["RayCluster"].store.get(namespace, str(cluster_name))
            queued = self.queued_owner_of_cluster(cluster) if cluster is not None else None
            return str(queued.workload) if queued is not None else None
        if pod_labels.get(labels.ORIGINATED_FROM_CRD) == "RayJob":
            job_name = str(pod_labels.get(labels.ORIGINATED_FROM_CR_NAME))
            job = self.informers["RayJob"].store.get(namespace, job_name)
            queued = self.queued("RayJob", job) if job is not None else None
            return str(queued.workload) if queued is not None else None
        return None


def submitter_rayjob_key(pod: Mapping[str, Any]) -> list[str]:
    """Indexer: "namespace/<RayJob>" of a submitter pod (its Job is named after the RayJob)."""
    pod_labels = pod["metadata"].get("labels") or {}
    job = pod_labels.get(JOB_NAME_LABEL) or pod_labels.get(LEGACY_JOB_NAME_LABEL)
    return [f"{pod['metadata']['namespace']}/{job}"] if job else []


def _cluster_label(pod: Mapping[str, Any]) -> list[str]:
    value = (pod["metadata"].get("labels") or {}).get(labels.RAY_CLUSTER)
    return [f"{pod['metadata']['namespace']}/{value}"] if value else []
