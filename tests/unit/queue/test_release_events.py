"""Which Workload changes free quota (and so jump the Workload queue)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.release_events import enqueue_first_when_freeing, frees_quota


def _workload(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "w", "namespace": "ns"}, "status": status}


ADMITTED = _workload(admission={"clusterQueue": "cq"}, conditions=[])
FINISHED = _workload(admission={"clusterQueue": "cq"}, conditions=[{"type": "Finished", "status": "True"}])
CLEARED = _workload(conditions=[{"type": "Evicted", "status": "True"}])


def test_finish_clear_and_deletion_free_quota() -> None:
    assert frees_quota(FINISHED, ADMITTED)
    assert frees_quota(CLEARED, ADMITTED)
    deleting = {**ADMITTED, "metadata": {**ADMITTED["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert frees_quota(deleting, ADMITTED)


def test_routine_changes_do_not() -> None:
    assert not frees_quota(ADMITTED, None)
    assert not frees_quota(ADMITTED, _workload(conditions=[]))
    assert not frees_quota(FINISHED, FINISHED)


def test_only_freeing_events_are_sent_first() -> None:
    sent: list[ObjectKey] = []
    handle = enqueue_first_when_freeing(sent.append)
    handle("MODIFIED", ADMITTED, _workload())
    handle("MODIFIED", FINISHED, ADMITTED)
    handle("DELETED", FINISHED, FINISHED)
    assert sent == [ObjectKey("ns", "w")]
