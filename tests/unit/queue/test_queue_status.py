"""The ClusterQueue's Active condition: Ready, Inactive with the engine's reason, or Terminating."""

from __future__ import annotations

import asyncio
from typing import Any

from rayquota.operator.queue.status import QueueStatusWriter, cluster_queue_status
from rayquota.queueing import (
    ClusterQueue,
    ClusterQueueStatus,
    Engine,
    FlavorQuotas,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)

NOW = "2026-11-22T09:00:00Z"


def active(status: ClusterQueueStatus, *, terminating: bool = False) -> dict[str, str]:
    written = cluster_queue_status(None, status, [], NOW, terminating=terminating)
    (condition,) = [c for c in written["conditions"] if c["type"] == "Active"]
    return condition


def test_a_deleted_cluster_queue_is_inactive_terminating_and_says_what_it_holds() -> None:
    status = ClusterQueueStatus("team", pending=1, admitted=2, usage={}, borrowed={}, disabled_reason=None)
    assert active(status)["status"] == "True"
    terminating = active(status, terminating=True)
    assert terminating["status"] == "False" and terminating["reason"] == "Terminating"
    assert "ClusterQueue team is being deleted" in terminating["message"]
    assert "2 admitted workload(s)" in terminating["message"]


def test_an_inactive_cluster_queue_gives_the_engines_reason() -> None:
    status = ClusterQueueStatus("team", 0, 0, {}, {}, disabled_reason="flavor x does not exist")
    inactive = active(status)
    assert inactive["status"] == "False" and inactive["reason"] == "Inactive"
    assert inactive["message"] == "flavor x does not exist"


def test_a_cluster_queue_deleted_during_a_status_pass_is_skipped_not_fatal() -> None:
    """The pass awaits each write; a ClusterQueue the engine forgets meanwhile (deleted) must not
    end the status writer (it used to raise KeyError and stop the operator)."""

    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("f"))
    for name in ("a", "b"):
        group = ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota.of(1)}),))
        engine.upsert_cluster_queue(ClusterQueue(name, (group,)))
    written: list[str] = []

    class Status:
        async def write(self, resource: Any, obj: Any, status: Any) -> None:
            written.append(obj["metadata"]["name"])
            engine.delete_cluster_queue("b")  # deleted while this write is awaited

    class Store:
        def __init__(self, objs: list[dict[str, Any]]) -> None:
            self.store = self
            self.objs = objs

        def list(self) -> list[dict[str, Any]]:
            return self.objs

    manager = type("Manager", (), {"status": Status()})()
    queues = Store([{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}])
    writer = QueueStatusWriter(manager, engine, queues, Store([]), Store([]))  # type: ignore[arg-type]
    asyncio.run(writer.write_all())
    assert written == ["a"]
