"""The ``rayquota.io/manual`` controller consumes a Retry annotation even when the Workload
changed between its status write and the removal: the workload reconciler writes the eviction
that the Retry causes right then. Removed by a PUT of the stored object, the annotation met a
409 and stayed, and the next reservation was sent back by the same, old decision."""

from __future__ import annotations

from typing import Any, cast

from rayquota.operator.core import Informer, Manager, ObjectKey
from rayquota.operator.queue.admission.manual_check import STATE_ANNOTATION_PREFIX, ManualChecks
from rayquota.operator.queue.kueue.api_group import RAYQUOTA
from tests.unit.queue.reconciler_harness import NAMESPACE, ApiServer, FakeManager

CHECK = "approval"
KEY = STATE_ANNOTATION_PREFIX + CHECK
PATH = RAYQUOTA.workloads.path(NAMESPACE, "first")


class ReconcilerWritesBetween(ApiServer):
    """After the first status write, another writer's status write lands (the eviction)."""

    def __init__(self) -> None:
        super().__init__()
        self.interleaved = False

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        stored = await super().replace(path, body)
        if path.endswith("/status") and not self.interleaved:
            self.interleaved = True
            status = {**stored["status"], "conditions": [{"type": "Evicted", "status": "True"}]}
            self.put(PATH, {**stored, "status": status})
        return stored


class Store:
    def __init__(self, server: ApiServer, objs: list[dict[str, Any]] | None = None) -> None:
        self.server = server
        self.objs = objs or []

    def get_key(self, key: ObjectKey) -> dict[str, Any] | None:
        return self.server.get(RAYQUOTA.workloads.path(key.namespace, key.name))

    def list(self) -> list[dict[str, Any]]:
        return self.objs


def _informer(store: Store) -> Informer:
    return cast(Informer, type("FakeInformer", (), {"store": store})())


async def test_a_retry_annotation_is_consumed_though_the_workload_changed_meanwhile() -> None:
    server = ReconcilerWritesBetween()
    entry = {"name": CHECK, "state": "Pending", "lastTransitionTime": "2026-01-02T03:04:05Z", "message": ""}
    server.put(
        PATH,
        {
            "metadata": {"namespace": NAMESPACE, "name": "first", "uid": "u", "annotations": {KEY: "Retry"}},
            "status": {"admission": {"clusterQueue": "team"}, "admissionChecks": [entry]},
        },
    )
    manager = FakeManager(server)
    check = {"metadata": {"name": CHECK}, "spec": {"controllerName": "rayquota.io/manual"}}
    controller = ManualChecks(
        cast(Manager, manager), RAYQUOTA, _informer(Store(server, [check])), _informer(Store(server))
    )
    await controller.reconcile_workload(ObjectKey(NAMESPACE, "first"))
    stored = server.get(PATH)
    assert stored is not None
    assert [e["state"] for e in stored["status"]["admissionChecks"]] == ["Retry"]
    assert stored["status"]["conditions"] == [{"type": "Evicted", "status": "True"}]  # the other write stays
    assert KEY not in (stored["metadata"].get("annotations") or {})
