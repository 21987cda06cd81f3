"""What the manager writes in a worker: the copy of a Workload, the object that runs under it,
and their removal. Every write is idempotent (a copy that exists, or one already gone, is
success), so a reconcile cut short is repaired by the next."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping
from typing import Any

from rayquota.api.multikueue_v1alpha1 import ORIGIN_LABEL
from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.resources import PODS, Resource
from rayquota.operator.kube import Conflict, KubeClient
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.multikueue.worker import WorkerConnection
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

ATTEMPT_ANNOTATION = "multikueue.rayquota.io/attempt"
"""On a copy and its object: which reservation of the manager's Workload it was made for."""


def attempt_of(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION) or "")


def workload_copy(workload: Mapping[str, Any], origin: str, attempt: str) -> dict[str, Any]:
    """The Workload as the worker gets it: its spec, labels and annotations, no status, no owner
    (the object it stands for is made there only once the worker admits it)."""
    meta = workload["metadata"]
    return {
        "apiVersion": workload["apiVersion"],
        "kind": workload["kind"],
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin},
            "annotations": {**(meta.get("annotations") or {}), ATTEMPT_ANNOTATION: attempt},
        },
        "spec": copy.deepcopy(workload.get("spec") or {}),
    }


def with_attempt(body: dict[str, Any], attempt: str) -> dict[str, Any]:
    body["metadata"].setdefault("annotations", {})[ATTEMPT_ANNOTATION] = attempt
    return body


def pod_selectors(kind: str, name: str) -> list[str]:
    """The label selectors of the pods an object of ``kind`` named ``name`` owns, from its
    integration record's pod watches (a RayCluster's by ``ray.io/cluster``, a Job's by its name)."""
    return [
        f"{watch.index_labels[0]}={labels.label_value(name)}"
        for watch in ADAPTERS[kind].pod_watches
        if watch.owner_kind == kind
    ]


class RemoteWrites:
    def __init__(self, workloads: Resource, kinds: Mapping[str, Resource]) -> None:
        self.workloads = workloads
        self.kinds = kinds
        self.requests = 0  # writes sent to workers (the benchmark reads it)

    async def create(self, worker: WorkerConnection, resource: Resource, body: Mapping[str, Any]) -> None:
        client = _client(worker)
        self.requests += 1
        # Already there: made by an earlier reconcile whose answer was lost.
        with contextlib.suppress(Conflict):
            await client.create(resource.path(str(body["metadata"]["namespace"])), body)

    async def replace(self, worker: WorkerConnection, kind: str, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        self.requests += 1
        await _client(worker).replace(self.kinds[kind].path(str(meta["namespace"]), str(meta["name"])), body)

    async def remove(self, worker: WorkerConnection, key: ObjectKey, *, fence: bool = False) -> None:
        """The objects made for the Workload ``key`` there, then its copy. ``fence``: their pods
        too, at once (a stale copy that may still run while the workload runs elsewhere)."""
        client = _client(worker)
        # The object's children too: their pods stop sooner than through the worker's cascade.
        made = worker.objects_of(key, children=True)
        for kind, obj in made:
            if obj["metadata"].get("deletionTimestamp"):
                continue
            self.requests += 1
            await client.delete(self.kinds[kind].path(key.namespace, str(obj["metadata"]["name"])))
        if fence:
            for kind, obj in made:
                for selector in pod_selectors(kind, str(obj["metadata"]["name"])):
                    self.requests += 1
                    await client.request(
                        "DELETE",
                        PODS.path(key.namespace),
                        params={"labelSelector": selector},
                        body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                    )
        found: Obj | None = worker.workload(key)
        if found is not None and not found["metadata"].get("deletionTimestamp"):
            self.requests += 1
            await client.delete(self.workloads.path(key.namespace, key.name))

    async def remove_object(self, worker: WorkerConnection, kind: str, obj: Mapping[str, Any]) -> None:
        if obj["metadata"].get("deletionTimestamp"):
            return
        self.requests += 1
        meta = obj["metadata"]
        await _client(worker).delete(self.kinds[kind].path(str(meta["namespace"]), str(meta["name"])))


def _client(worker: WorkerConnection) -> KubeClient:
    if worker.client is None:
        raise ConnectionError(f"worker {worker.name} is not connected")
    return worker.client
