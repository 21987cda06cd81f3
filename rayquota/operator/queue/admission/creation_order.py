"""Queue order among objects created in the same second.

Creation timestamps have one-second resolution, so FIFO between objects created in one second
would otherwise follow the order in which reconciles happened to run. The API server gives every
write a resourceVersion that grows with each write (etcd's revision), so the resourceVersion an
object was created with orders creations exactly.

A Workload we create records its owner's creation instant and creation resourceVersion in an
annotation (``<creationTimestamp> <resourceVersion>``), so the order survives restarts and the
owner's later updates. Workloads created by others (no annotation) fall back to their own
creation timestamp, then to the order in which the engine first saw them: Kueue orders by
priority, creation timestamp, then UID, so there the order within a second is arbitrary too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.cache.informer import ADDED, DELETED
from rayquota.operator.queue import naming


class CreationVersions:
    """The resourceVersion each object had when this process first saw it: for an object seen
    being created (a watch ADDED event), its creation revision; for one listed at start-up, the
    version it has then (the same unless it was changed since, while we were not watching)."""

    def __init__(self) -> None:
        self._first_seen: dict[str, str] = {}

    def on_change(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        meta = obj["metadata"]
        uid = str(meta.get("uid") or "")
        if event == DELETED:
            self._first_seen.pop(uid, None)
        elif event == ADDED:
            self._first_seen.setdefault(uid, str(meta.get("resourceVersion") or ""))

    def of(self, obj: Mapping[str, Any]) -> str:
        meta = obj["metadata"]
        return self._first_seen.get(str(meta.get("uid") or "")) or str(meta.get("resourceVersion") or "")


def annotation_value(obj: Mapping[str, Any], creation_version: str) -> str:
    """``<creationTimestamp> <resourceVersion at creation>`` of a queued object."""
    return f"{obj['metadata'].get('creationTimestamp') or ''} {creation_version}"


def parse(annotations: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """(creationTimestamp, creation resourceVersion) from a Workload's annotations, if recorded."""
    raw = (annotations or {}).get(naming.CREATION_ORDER_ANNOTATION)
    if not raw:
        return None
    timestamp, _, version = str(raw).partition(" ")
    if not timestamp or not version.isdigit():
        return None
    return timestamp, int(version)
