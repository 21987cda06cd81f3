"""The pending workloads of a queue as the operator's own engine orders them (the order
``rayquota explain`` and the dashboard's queue page give), read from the live engine and the
Workload cache on the operator's loop: no copy, nothing written."""

from __future__ import annotations

from rayquota.operator.core import Informer
from rayquota.operator.queue.admission.driver import Driver, workload_key_of
from rayquota.operator.visibility.summary import Pending


class EngineOrder:
    def __init__(self, driver: Driver, workloads: Informer, local_queues: Informer) -> None:
        self.driver = driver
        self.workloads = workloads
        self.local_queues = local_queues

    def cluster_queue(self, name: str) -> list[Pending] | None:
        """The queue's order, or None when the engine knows no such ClusterQueue."""
        engine = self.driver.engine
        if name not in engine.cluster_queue_names():
            return None
        order = []
        for engine_key, _parked in engine.pending_order(name):
            entry = self._entry(workload_key_of(engine_key))
            if entry is not None:
                order.append(entry)
        return order

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        body = self.local_queues.store.get(namespace, local_queue)
        if body is None:
            return None
        return str((body.get("spec") or {}).get("clusterQueue") or "") or None

    def _entry(self, key: str) -> Pending | None:
        namespace, _, name = key.partition("/")
        spec = self.driver.spec_of(key)
        if spec is None:
            return None
        body = self.workloads.store.get(namespace, name) or {}
        meta = body.get("metadata") or {}
        return Pending(
            namespace=namespace,
            name=name,
            local_queue=spec.queue_name,
            priority=spec.priority,
            creation_timestamp=str(meta.get("creationTimestamp") or ""),
            owner_references=tuple(meta.get("ownerReferences") or ()),
        )
