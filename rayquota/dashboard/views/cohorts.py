"""The Cohorts and ClusterQueues page: the cohort tree, and per queue and flavor the usage
against nominal quota, borrowing and lending limits; pending and admitted counts; stop policy
and conditions. Numbers come from the engine snapshot (usage as admitted right now), the
policies and conditions from the cached objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.cli_tables import inactive_reason
from rayquota.dashboard.queue_model import QueueSnapshot
from rayquota.dashboard.views.common import amount, conditions
from rayquota.queueing import NodeSnapshot


def resource_bars(node: NodeSnapshot, snapshot: QueueSnapshot, borrowed: Mapping[Any, int]) -> list[Any]:
    """Per flavor, per resource: usage, nominal, limits (None: unlimited), borrowed, free."""
    flavors: dict[str, list[dict[str, Any]]] = {}
    keys = sorted(set(node.quota) | set(node.usage))
    for flavor, resource in keys:
        nominal, borrowing, lending = node.quota.get((flavor, resource), (0, None, None))
        used = node.usage.get((flavor, resource), 0)
        bar: dict[str, Any] = {
            "resource": resource,
            "usage": amount(used, resource),
            "nominal": amount(nominal, resource),
            "borrowingLimit": None if borrowing is None else amount(borrowing, resource),
            "lendingLimit": None if lending is None else amount(lending, resource),
            "borrowed": amount(borrowed.get((flavor, resource), 0), resource),
        }
        if node.is_cluster_queue:
            bar["available"] = amount(snapshot.engine.available(node.name, flavor, resource), resource)
        flavors.setdefault(flavor, []).append(bar)
    return [{"flavor": name, "resources": bars} for name, bars in flavors.items()]


def _cluster_queue(node: NodeSnapshot, snapshot: QueueSnapshot, body: Mapping[str, Any] | None) -> Any:
    status = snapshot.engine.cluster_queue_status(node.name)
    spec = (body or {}).get("spec") or {}
    return {
        "name": node.name,
        "kind": "ClusterQueue",
        "cohort": node.parent,
        "queueingStrategy": str(spec.get("queueingStrategy") or "BestEffortFIFO"),
        "stopPolicy": str(spec.get("stopPolicy") or "None"),
        "inactive": _inactive(node, body),
        "pending": {"active": status.pending_active, "inadmissible": status.pending_inadmissible},
        "admitted": status.admitted,
        "flavors": resource_bars(node, snapshot, status.borrowed),
        "conditions": conditions(body or {}),
    }


def _inactive(node: NodeSnapshot, body: Mapping[str, Any] | None) -> str | None:
    """Why the queue admits nothing: a cohort cycle (seen here), else the operator's Active=False
    condition (a missing flavor, check or topology: the operator's caches decide, not this copy)."""
    if node.disabled_reason is not None:
        return node.disabled_reason
    inactive = inactive_reason(body) if body is not None else None
    return f"{inactive[0]}: {inactive[1]}" if inactive is not None else None


def _cohort(node: NodeSnapshot, snapshot: QueueSnapshot) -> Any:
    borrowed = {
        fr: used - node.subtree.get(fr, 0)
        for fr, used in node.usage.items()
        if used > node.subtree.get(fr, 0)
    }
    return {
        "name": node.name,
        "kind": "Cohort",
        "cohort": node.parent,
        "flavors": resource_bars(node, snapshot, borrowed),
    }


def cohorts_page(
    snapshot: QueueSnapshot, cluster_queue_bodies: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    bodies = {str(b["metadata"]["name"]): b for b in cluster_queue_bodies}
    nodes = snapshot.nodes()
    entries = {
        (n.is_cluster_queue, n.name): (
            _cluster_queue(n, snapshot, bodies.get(n.name)) if n.is_cluster_queue else _cohort(n, snapshot)
        )
        for n in nodes
    }
    children: dict[str | None, list[dict[str, Any]]] = {}
    for node in sorted(nodes, key=lambda n: (n.is_cluster_queue, n.name)):
        children.setdefault(node.parent, []).append(
            {"name": node.name, "kind": "ClusterQueue" if node.is_cluster_queue else "Cohort"}
        )

    def subtree(item: dict[str, Any], depth: int) -> dict[str, Any]:
        below = children.get(item["name"], []) if item["kind"] == "Cohort" and depth < 32 else []
        return {**item, "children": [subtree(child, depth + 1) for child in below]}

    return {
        "tree": [subtree(item, 0) for item in children.get(None, [])],
        "clusterQueues": [v for (is_cq, _), v in sorted(entries.items()) if is_cq],
        "cohorts": [v for (is_cq, _), v in sorted(entries.items()) if not is_cq],
        "cycles": snapshot.engine.cohort_cycles(),
    }
