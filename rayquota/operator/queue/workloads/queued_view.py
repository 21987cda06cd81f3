"""What one reconcile of a queued object sees of it: its children, its pods by part and the
clusters they run in (pure reads over what the workload reconciler looked up)."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.adapters.capabilities import RunsItsOwnCluster
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.operator.queue.objects import Queued


@dataclass(frozen=True)
class QueuedView:
    """``pods_by_part``: the object's pods per part (a cluster); a part seen before is there
    until its pods are gone (a deleted child's pods linger and hold quota)."""

    queued: Queued
    children: list[Obj]
    pods_by_part: dict[str, list[Obj]]

    @property
    def pods(self) -> list[Obj]:
        return [p for part_pods in self.pods_by_part.values() for p in part_pods]

    @property
    def child_names(self) -> list[str]:
        return [str(c["metadata"]["name"]) for c in self.children]

    def parts_to_remember(self) -> list[str]:
        """The parts whose pods count until gone, even once the object or its child is deleted."""
        return [part for part, part_pods in self.pods_by_part.items() if part_pods] + self.child_names

    def clusters(self) -> list[str]:
        """Every cluster of the object: with pods, as a child, or the object itself."""
        clusters = [*self.pods_by_part, *self.child_names]
        adapter = self.queued.adapter
        if isinstance(adapter, RunsItsOwnCluster):
            clusters.append(adapter.own_cluster(self.queued.obj))
        return clusters

    def lingering(self, demand: Demand) -> bool:
        """Pods of a part the demand no longer has (a deleted child's) are still there."""
        return any(part_pods for part, part_pods in self.pods_by_part.items() if part not in demand.parts)
