"""The resource-in-use finalizer on ClusterQueues and ResourceFlavors (Kueue's semantics).

- A ClusterQueue carries it while it exists. Once deleted it admits nothing more (the engine
  holds its pending workloads with that reason), keeps the quota of its admitted workloads,
  and loses the finalizer only when none of them holds quota any longer.
- A ResourceFlavor carries it while it exists; once deleted, it is let go when no ClusterQueue
  (terminating ones included) names it in its resource groups.

The name is ``rayquota.io/resource-in-use`` on our API group and Kueue's own
``kueue.x-k8s.io/resource-in-use`` in Kueue-API mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import Informer, Manager, ObjectKey, Result
from rayquota.operator.core.finalizers import set_finalizer
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.kueue.api_group import QueueApi

# How often a terminating ClusterQueue looks again at what it still holds. Quota is released
# by the Workload controller (pods gone, object deleted), with no event on the ClusterQueue.
TERMINATING_RECHECK_S = 1.0

TERMINATING_REASON = "Terminating"


def flavors_named_by(cluster_queue: Mapping[str, Any]) -> set[str]:
    """The ResourceFlavors a ClusterQueue's resource groups name."""
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    return {str(f["name"]) for g in groups for f in g.get("flavors") or [] if f.get("name")}


def terminating_message(name: str, holding: int) -> str:
    return (
        f"ClusterQueue {name} is being deleted: it admits no new workloads, and goes once its "
        f"{holding} admitted workload(s) have released their quota"
    )


class InUseFinalizers:
    def __init__(
        self,
        manager: Manager,
        api: QueueApi,
        loop: AdmissionLoop,
        cluster_queues: Informer,
        flavors: Informer,
    ) -> None:
        self.manager = manager
        self.api = api
        self.loop = loop
        self.cluster_queues = cluster_queues
        self.flavors = flavors
        self.finalizer = api.resource_in_use_finalizer
        # Per terminating ClusterQueue: the count last announced in an event (one per change).
        self._announced: dict[str, int] = {}

    def register(self) -> None:
        queues = self.manager.controller("clusterqueue-in-use", self.reconcile_cluster_queue)
        queues.watch(self.cluster_queues)
        flavors = self.manager.controller("resourceflavor-in-use", self.reconcile_flavor)
        flavors.watch(self.flavors)
        # A ClusterQueue that changes or goes may be what kept a deleted flavor.
        flavors.watch(
            self.cluster_queues,
            lambda cq: [ObjectKey("", name) for name in flavors_named_by(cq)],
            primary=False,
        )

    # --- ClusterQueues ------------------------------------------------------------------------

    def admitted_in(self, name: str) -> int:
        """Workloads whose quota the engine still charges to the queue (evicting ones included)."""
        engine = self.loop.driver.engine
        if name not in engine.cluster_queue_names():
            return 0
        return engine.cluster_queue_status(name).admitted

    async def reconcile_cluster_queue(self, key: ObjectKey) -> Result | None:
        # Before the engine is rebuilt from the admitted Workloads every queue looks empty.
        await self.loop.restored.wait()
        cq = self.cluster_queues.store.get("", key.name)
        if cq is None:
            self._announced.pop(key.name, None)
            return None
        if not await self._held_in_deletion(self.api.cluster_queues, cq):
            return None
        holding = self.admitted_in(key.name)
        if holding:
            if self._announced.get(key.name) != holding:
                self._announced[key.name] = holding
                message = terminating_message(key.name, holding)
                self.manager.recorder.post(cq, "Normal", TERMINATING_REASON, message)
            return Result(requeue_after_s=TERMINATING_RECHECK_S)
        self._announced.pop(key.name, None)
        await self._set_finalizer(self.api.cluster_queues, cq, present=False)
        return None

    # --- ResourceFlavors ----------------------------------------------------------------------

    async def reconcile_flavor(self, key: ObjectKey) -> Result | None:
        flavor = self.flavors.store.get("", key.name)
        if flavor is None:
            return None
        if not await self._held_in_deletion(self.api.resource_flavors, flavor):
            return None
        if any(key.name in flavors_named_by(cq) for cq in self.cluster_queues.store.list()):
            return None  # still named by a ClusterQueue, whose changes bring us back
        await self._set_finalizer(self.api.resource_flavors, flavor, present=False)
        return None

    async def _held_in_deletion(self, resource: Resource, obj: Mapping[str, Any]) -> bool:
        """Puts the finalizer on a live object; True when the object is being deleted and our
        finalizer still holds it (the caller decides whether to let it go)."""
        meta = obj["metadata"]
        present = self.finalizer in (meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            return present
        if not present:
            await self._set_finalizer(resource, obj, present=True)
        return False

    async def _set_finalizer(self, resource: Resource, obj: Mapping[str, Any], *, present: bool) -> None:
        path = resource.path(None, str(obj["metadata"]["name"]))
        await set_finalizer(self.manager.client, path, obj, self.finalizer, present=present)
