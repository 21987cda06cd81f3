"""Which Workload changes free quota (and so jump the Workload queue)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.workloads.release_events import (
    enqueue_first_when_freeing,
    enqueue_first_when_pod_leaves,
    enqueue_soon_when_new,
    frees_quota,
)


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


class _Queued:
    def __init__(self, workload: ObjectKey) -> None:
        self.workload = workload


class _Objects:
    """Queued objects are those labelled; a Workload exists for the keys in ``workloads``."""

    def __init__(self, *workloads: ObjectKey) -> None:
        self.workloads = set(workloads)

    def queued(self, kind: str, obj: dict[str, Any]) -> _Queued | None:
        if "queue" not in (obj["metadata"].get("labels") or {}):
            return None
        return _Queued(ObjectKey(obj["metadata"]["namespace"], f"{kind.lower()}-{obj['metadata']['name']}"))

    def workload(self, key: ObjectKey) -> dict[str, Any] | None:
        return {} if key in self.workloads else None


def _rayjob(name: str, queued: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": {"queue": "q"} if queued else {}}}


def test_a_new_queued_object_without_a_workload_goes_first() -> None:
    first: list[ObjectKey] = []
    handle = enqueue_soon_when_new("RayJob", _Objects(ObjectKey("ns", "rayjob-old")), first.append)
    handle("ADDED", _rayjob("new"), None)
    handle("ADDED", _rayjob("old"), None)  # its Workload exists (a restart's initial list)
    handle("ADDED", _rayjob("plain", queued=False), None)
    handle("MODIFIED", _rayjob("changed"), _rayjob("changed"))
    assert first == [ObjectKey("ns", "rayjob-new")]


def test_a_pod_gone_sends_first_only_the_workloads_holding_quota() -> None:
    holding, waiting = ObjectKey("ns", "holds"), ObjectKey("ns", "waits")
    sent: list[ObjectKey] = []
    handle = enqueue_first_when_pod_leaves(
        lambda _pod: [holding, waiting], {holding}.__contains__, sent.append
    )
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}}
    handle("MODIFIED", pod, pod)
    handle("ADDED", pod, None)
    assert sent == []
    handle("DELETED", pod, pod)
    assert sent == [holding]
