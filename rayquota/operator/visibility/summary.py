"""The PendingWorkloadsSummary bodies: a ClusterQueue's or a LocalQueue's pending workloads, in
the engine's queue order, with their positions (from 0) in the ClusterQueue and the LocalQueue,
a page at a time (``limit``, ``offset``). Pure: no I/O, no Kubernetes client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000


class BadQuery(ValueError):
    """A query parameter that is not what the API takes; the message names it and its value."""


@dataclass(frozen=True)
class Page:
    limit: int = DEFAULT_LIMIT
    offset: int = 0


def _count(query: Mapping[str, str], key: str, default: int) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadQuery(f"query parameter {key}={raw!r} is not an integer") from None


def page_of(query: Mapping[str, str]) -> Page:
    """As Kueue bounds them: a negative limit or offset counts as 0, a limit above 100000 as 100000."""
    limit = _count(query, "limit", DEFAULT_LIMIT)
    offset = _count(query, "offset", 0)
    return Page(limit=min(max(limit, 0), MAX_LIMIT), offset=max(offset, 0))


@dataclass(frozen=True)
class Pending:
    """One pending workload, as the summary names it."""

    namespace: str
    name: str
    local_queue: str
    priority: int
    creation_timestamp: str = ""
    owner_references: tuple[Mapping[str, Any], ...] = field(default=())


def _item(entry: Pending, in_cluster_queue: int, in_local_queue: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": entry.name, "namespace": entry.namespace}
    if entry.creation_timestamp:
        metadata["creationTimestamp"] = entry.creation_timestamp
    if entry.owner_references:
        metadata["ownerReferences"] = [
            {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref}
            for ref in entry.owner_references
        ]
    return {
        "metadata": metadata,
        "priority": entry.priority,
        "localQueueName": entry.local_queue,
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }


def in_cluster_queue(order: Sequence[Pending], page: Page) -> list[dict[str, Any]]:
    """The page of a ClusterQueue's order; each item's LocalQueue position counts every workload
    of its LocalQueue ahead of it, on this page or before it."""
    items: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(order[: page.offset + page.limit]):
        queue = (entry.namespace, entry.local_queue)
        position = seen.get(queue, 0)
        seen[queue] = position + 1
        if index >= page.offset:
            items.append(_item(entry, index, position))
    return items


def in_local_queue(order: Sequence[Pending], namespace: str, name: str, page: Page) -> list[dict[str, Any]]:
    """The page of one LocalQueue's part of its ClusterQueue's order."""
    items: list[dict[str, Any]] = []
    position = 0
    for index, entry in enumerate(order):
        if len(items) >= page.limit:
            break
        if entry.namespace != namespace or entry.local_queue != name:
            continue
        if position >= page.offset:
            items.append(_item(entry, index, position))
        position += 1
    return items


def summary(api_version: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    }
