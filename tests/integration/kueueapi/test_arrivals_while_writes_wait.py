"""A Workload joins the engine's queues when its watch event arrives, not when a worker of the
Workload controller gets to it. Under a flood every worker can be waiting on a slow API server
for an admission's status write; Kueue's large-scale benchmark (50,000 Workloads created in
two minutes) saw the engine learn of only the few thousand the reconciles had reached, every
ClusterQueue status show nothing pending, and Kueue's recorder end the run with nothing admitted.

Here every Workload status write of the test's namespace is held until the test lets it go, so
the first admissions take all the workers; the Workloads created after them must still be
counted pending in the ClusterQueue's status."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.status import StatusWriter
from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"
# The operator fixture's worker count per controller (it is started with the defaults).
WORKERS = OperatorConfig.workers
LATE = 4


class HeldWrites:
    """Workload status writes of one namespace, held until :meth:`release`."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.holding: set[str] = set()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_write = StatusWriter.write

        async def write(
            writer: StatusWriter, resource: Resource, obj: Mapping[str, Any], status: Mapping[str, Any]
        ) -> Any:
            name = str(obj["metadata"]["name"])
            if resource.kind == "Workload" and obj["metadata"].get("namespace") == self.namespace:
                self.holding.add(name)
                try:
                    while not self._released.is_set():
                        await asyncio.sleep(0.05)  # the operator's loop, not the test: a slow write
                finally:
                    self.holding.discard(name)
            return await real_write(writer, resource, obj, status)

        monkeypatch.setattr(StatusWriter, "write", write)


@pytest.fixture
def held_writes(monkeypatch: pytest.MonkeyPatch, namespace: str) -> Iterator[HeldWrites]:
    held = HeldWrites(namespace)
    held.install(monkeypatch)
    try:
        yield held
    finally:
        held.release()


def _cluster_queue_status(control_plane: Any, name: str) -> dict[str, Any]:
    shown = control_plane.kubectl("get", "clusterqueues.kueue.x-k8s.io", name, "-o", "json").stdout
    return dict(json.loads(shown).get("status") or {})


def _reserved(kube: Kube, name: str, status: str) -> bool:
    return (condition(kube.get(WORKLOADS, name), "QuotaReserved") or {}).get("status") == status


def test_workloads_are_counted_pending_while_every_worker_waits_on_a_write(
    kueue_operator: None,
    kube: Kube,
    kueue_quota: KueueQuota,
    control_plane: Any,
    held_writes: HeldWrites,
) -> None:
    flavor = kueue_quota.kueue_flavor("rf")
    cq = kueue_quota.kueue_cluster_queue("cq", flavor, {"cpu": WORKERS})
    kueue_quota.local_queue("lq", cq)
    for i in range(WORKERS):
        kube.apply(kueue_workload(f"first-{i}", "lq", "1"))
    wait_for(
        f"all {WORKERS} workers waiting on an admission's write",
        lambda: len(held_writes.holding) >= WORKERS,
    )

    for i in range(LATE):
        kube.apply(kueue_workload(f"late-{i}", "lq", "1"))
    status = wait_for(
        f"ClusterQueue {cq} showing the {LATE} late Workloads pending",
        lambda: (s := _cluster_queue_status(control_plane, cq)).get("pendingWorkloads") == LATE and s,
    )
    assert status["reservingWorkloads"] == WORKERS
    assert len(held_writes.holding) >= WORKERS, "a worker got free: the test proved nothing"

    held_writes.release()
    for i in range(WORKERS):
        wait_for(f"first-{i} admitted", lambda i=i: _reserved(kube, f"first-{i}", "True"))
    for i in range(LATE):
        wait_for(f"late-{i} pending", lambda i=i: _reserved(kube, f"late-{i}", "False"))
