"""The Queue order page: the pending workloads of a ClusterQueue (or of one LocalQueue) in the
order the engine judges them, each with the engine's sentence (what it needs, what is free,
who holds it, who is ahead), its priority and age.

Rows of namespaces the user may not list keep their place in the order but show no name: a
team sees how many wait ahead of it, not whose work it is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.dashboard.queue_model import PendingEntry, QueueSnapshot
from rayquota.dashboard.views.common import HIDDEN, Page, amount, amounts_text, redact
from rayquota.queueing import format_quantity, never_fits


@dataclass(frozen=True)
class QueueScope:
    cluster_queue: str
    local_queue: tuple[str, str] | None = None
    """(namespace, name): only this LocalQueue's workloads (positions stay the ClusterQueue's)"""


def _owner(workload: Mapping[str, Any]) -> dict[str, str] | None:
    refs = workload["metadata"].get("ownerReferences") or []
    return {"kind": str(refs[0].get("kind")), "name": str(refs[0].get("name"))} if refs else None


def _placed_in_scope(snapshot: QueueSnapshot, scope: QueueScope) -> list[tuple[int, PendingEntry]]:
    """The pending entries in scope, each with its position over the whole ClusterQueue."""
    placed = []
    for position, entry in enumerate(snapshot.pending_order(scope.cluster_queue), start=1):
        spec = snapshot.specs.get(entry.workload)
        if scope.local_queue is None or (
            spec is not None and (spec.namespace, spec.queue_name) == scope.local_queue
        ):
            placed.append((position, entry))
    return placed


def _pending_row(
    snapshot: QueueSnapshot,
    position: int,
    entry: PendingEntry,
    visible: frozenset[str] | None,
    known_namespaces: set[str],
    now: float,
) -> dict[str, Any]:
    """One pending workload's row; a namespace the user may not list keeps its place, not its name."""
    namespace, name = entry.workload.split("/", 1)
    body = snapshot.workloads.get(entry.workload)
    spec = snapshot.specs.get(entry.workload)
    row: dict[str, Any] = {
        "position": position,
        "inadmissible": entry.inadmissible,
        "scaleUp": entry.scale_up,
        "priority": spec.priority if spec else 0,
        "ageSeconds": max(0, round(now - spec.created)) if spec and spec.created else None,
    }
    if visible is not None and namespace not in visible:
        return {**row, "hidden": True, "name": HIDDEN}
    totals = spec.totals() if spec else {}
    reason = snapshot.reason(entry)
    return {
        **row,
        "hidden": False,
        "namespace": namespace,
        "name": name,
        "localQueue": spec.queue_name if spec else "",
        "owner": _owner(body) if body else None,
        "needs": amounts_text(totals),
        "reason": redact(reason, known_namespaces, visible),
        "fitsNow": snapshot.fits_now(entry.workload),
        "neverFits": never_fits(reason),
    }


def _free_rows(snapshot: QueueSnapshot, cluster_queue: str) -> list[dict[str, Any]]:
    """Per flavor and resource of the ClusterQueue: what is free now and its nominal quota."""
    node = next((n for n in snapshot.nodes() if n.is_cluster_queue and n.name == cluster_queue), None)
    free = []
    if node is not None:
        for flavor, resource in sorted(node.quota):
            free.append(
                {
                    "flavor": flavor,
                    "resource": resource,
                    "free": amount(snapshot.engine.available(cluster_queue, flavor, resource), resource),
                    "nominal": amount(node.quota[(flavor, resource)][0], resource),
                }
            )
    return free


def _holder_rows(
    snapshot: QueueSnapshot, cluster_queue: str, visible: frozenset[str] | None
) -> list[dict[str, Any]]:
    """The workloads holding the ClusterQueue's quota and what each holds (hidden ones nameless)."""
    holders = []
    for key in snapshot.holders(cluster_queue):
        namespace = key.split("/", 1)[0]
        if visible is not None and namespace not in visible:
            holders.append({"hidden": True, "name": HIDDEN})
            continue
        status = snapshot.engine.workload(key)
        usage = status.usage if status is not None else {}
        holding = {resource: q for (_, resource), q in usage.items()}
        holders.append(
            {
                "hidden": False,
                "namespace": namespace,
                "name": key.split("/", 1)[1],
                "holds": ", ".join(f"{r} {format_quantity(q, r)}" for r, q in sorted(holding.items())) or "-",
                "evicting": status is not None and status.phase == "Evicting",
            }
        )
    return holders


def queue_order_page(
    snapshot: QueueSnapshot,
    scope: QueueScope,
    visible: frozenset[str] | None,
    page: Page,
    now: float | None = None,
) -> dict[str, Any]:
    """``visible``: the namespaces whose Workloads the user may list (None: all)."""
    now = time.time() if now is None else now
    known_namespaces = {key.split("/", 1)[0] for key in snapshot.workloads}
    # Positions over the whole queue; rows (sentences, names) only for the page shown.
    window = page.cut(_placed_in_scope(snapshot, scope))
    rows = [
        _pending_row(snapshot, position, entry, visible, known_namespaces, now)
        for position, entry in window.pop("items")
    ]
    return {
        "clusterQueue": scope.cluster_queue,
        "exists": scope.cluster_queue in snapshot.engine.cluster_queue_names(),
        "localQueue": (
            {"namespace": scope.local_queue[0], "name": scope.local_queue[1]} if scope.local_queue else None
        ),
        "free": _free_rows(snapshot, scope.cluster_queue),
        "holders": _holder_rows(snapshot, scope.cluster_queue, visible),
        "pending": {**window, "items": rows},
    }


def local_queue_target(local_queue: Mapping[str, Any] | None) -> str | None:
    """The ClusterQueue a cached LocalQueue points at."""
    if local_queue is None:
        return None
    spec = local_queue.get("spec") or {}
    target = spec.get("clusterQueue")
    return str(target) if target else None
