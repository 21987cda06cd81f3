"""The Ray objects page: every RayCluster, RayJob and RayService (and any Ray kind the queue
integration registers later) with its gate, queue, status and a link to its Workload."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rayquota.operator.core.gate import QUOTA_RESERVED
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.naming import KUEUE_QUEUE_LABEL, QUEUE_LABEL
from rayquota.operator.queue.objects import is_child
from rayquota.operator.ray.vocabulary import conditions as ray_conditions

STATE_FIELDS = ("state", "jobDeploymentStatus", "jobStatus", "serviceStatus")


def ray_state(obj: Mapping[str, Any]) -> str:
    """The object's own words for where it is (KubeRay's status fields), joined."""
    status = obj.get("status") or {}
    words = [str(status[f]) for f in STATE_FIELDS if status.get(f)]
    if not words:
        ready = ray_conditions.find(status.get("conditions"), "Ready")
        if ready is not None:
            words.append("Ready" if ready.get("status") == "True" else str(ready.get("reason") or "NotReady"))
    return " / ".join(words) or "-"


def gate_state(kind: str, obj: Mapping[str, Any]) -> str:
    adapter = ADAPTERS.get(kind)
    if adapter is None:
        return "-"
    return "suspended" if adapter.is_suspended(obj) else "open"


def queue_of(obj: Mapping[str, Any]) -> str | None:
    labels = obj["metadata"].get("labels") or {}
    value = labels.get(QUEUE_LABEL) or labels.get(KUEUE_QUEUE_LABEL)
    return str(value) if value else None


def ray_row(
    kind: str, obj: Mapping[str, Any], workload_of: Callable[[str, str, str], Mapping[str, Any] | None]
) -> dict[str, Any]:
    meta = obj["metadata"]
    namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
    workload = workload_of(kind, namespace, name)
    quota = ray_conditions.find((obj.get("status") or {}).get("conditions"), QUOTA_RESERVED)
    return {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "queue": queue_of(obj),
        "child": kind == "RayCluster" and is_child(obj),
        "gate": gate_state(kind, obj),
        "state": ray_state(obj),
        "quota": None if quota is None else {"status": quota.get("status"), "message": quota.get("message")},
        "workload": None
        if workload is None
        else {"namespace": namespace, "name": workload["metadata"]["name"]},
        "created": str(meta.get("creationTimestamp") or ""),
    }


def ray_objects_page(
    objects: Mapping[str, Sequence[Mapping[str, Any]]],
    workload_of: Callable[[str, str, str], Mapping[str, Any] | None],
    kind_filter: str | None = None,
    namespace_filter: str | None = None,
) -> list[dict[str, Any]]:
    """``objects``: kind -> the objects the user may see. Newest first within a kind."""
    rows = []
    for kind in sorted(objects):
        if kind_filter and kind != kind_filter:
            continue
        for obj in objects[kind]:
            if namespace_filter and obj["metadata"].get("namespace") != namespace_filter:
                continue
            rows.append(ray_row(kind, obj, workload_of))
    rows.sort(key=lambda r: (r["kind"], r["namespace"], r["name"]))
    return rows
