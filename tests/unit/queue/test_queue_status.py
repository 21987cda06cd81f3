"""The ClusterQueue's Active condition: Ready, Inactive with the engine's reason, or Terminating."""

from __future__ import annotations

from rayquota.operator.queue.status import cluster_queue_status
from rayquota.queueing import ClusterQueueStatus

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
