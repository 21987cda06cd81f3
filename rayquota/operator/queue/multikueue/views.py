"""What the dispatch decision reads, taken from the objects: the manager's Workload (its
MultiKueue check entry, its reservation) and each worker's copy. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.queue.multikueue.dispatch import Local, RemoteCopy, Worker
from rayquota.operator.queue.multikueue.remote import attempt_of
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import CheckState

Obj = Mapping[str, Any]


def check_entry(workload: Obj, checks: set[str]) -> Mapping[str, Any] | None:
    """The workload's ``status.admissionChecks`` entry of a MultiKueue check, if it has one."""
    for entry in (workload.get("status") or {}).get("admissionChecks") or ():
        if entry.get("name") in checks:
            return entry  # type: ignore[no-any-return]
    return None


def attempt(workload: Obj, entry: Mapping[str, Any]) -> str:
    """Which reservation this is: the check's retries and when the quota was reserved. A copy
    made for another reservation is stale."""
    reserved = conditions.find((workload.get("status") or {}).get("conditions"), "QuotaReserved") or {}
    return f"{int(entry.get('retryCount') or 0)}/{reserved.get('lastTransitionTime') or ''}"


def _state(entry: Mapping[str, Any]) -> CheckState:
    try:
        return CheckState(str(entry.get("state")))
    except ValueError:
        return CheckState.PENDING


def _epoch(value: object) -> float:
    moment = parse_rfc3339(value)
    return moment.timestamp() if moment is not None else 0.0


def local_view(workload: Obj, entry: Mapping[str, Any], *, object_gone: bool) -> Local:
    status = workload.get("status") or {}
    conds = status.get("conditions")
    reserved = (
        conditions.is_true(conds, "QuotaReserved")
        and bool(status.get("admission"))
        and not conditions.is_true(conds, "Evicted")
    )
    done = (
        object_gone
        or bool(workload["metadata"].get("deletionTimestamp"))
        or conditions.is_true(conds, "Finished")
        or (workload.get("spec") or {}).get("active") is False
    )
    return Local(
        state=_state(entry),
        attempt=attempt(workload, entry),
        reserved=reserved,
        done=done,
        cluster_name=status.get("clusterName") or None,
        nominated=tuple(status.get("nominatedClusterNames") or ()),
        pending_since=_epoch(entry.get("lastTransitionTime")),
    )


def remote_copy(copy: Obj, objects: Sequence[Obj]) -> RemoteCopy:
    conds = (copy.get("status") or {}).get("conditions")
    admitted = conditions.find(conds, "Admitted")
    made_for = attempt_of(copy)
    return RemoteCopy(
        attempt=made_for,
        admitted_at=str(admitted.get("lastTransitionTime") or "")
        if admitted is not None and admitted.get("status") == "True"
        else None,
        evicted=conditions.is_true(conds, "Evicted"),
        finished=conditions.is_true(conds, "Finished"),
        has_object=any(attempt_of(o) == made_for for o in objects),
    )


def worker_view(
    name: str,
    *,
    connected: bool,
    lost_since: float | None,
    copy: Obj | None,
    objects: Sequence[Obj],
    local_attempt: str,
    room: float = 0.0,
) -> Worker:
    if not connected:
        return Worker(name, reachable=False, lost_since=lost_since)
    live = [o for o in objects if not o["metadata"].get("deletionTimestamp")]
    found = (
        remote_copy(copy, live)
        if copy is not None and not copy["metadata"].get("deletionTimestamp")
        else None
    )
    # An object made for another reservation, or left without its copy, must go.
    stray = any(found is None or attempt_of(o) != local_attempt for o in live)
    return Worker(name, reachable=True, copy=found, stray_object=stray, room=room)
