"""Topology and admission holds in the engine's memory: the events that feed topology placement
(Topologies, Nodes, the pods bound to them) and its queries, kept apart from the quota events.

:class:`TopologyEvents` is a component the engine's memory (:class:`~..engine.events.EngineEvents`)
holds and calls: it holds the room per domain (:mod:`.capacity`) and wakes the queues whose
workloads wait for room when room is freed, clearing the engine's fit caches through the
callable it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..model import ClusterNode, ResourceFlavor, Topology
from ..quota.accounting import Accounting
from .admission import TopologyAdmission
from .capacity import TopologyCapacity


class TopologyEvents:
    def __init__(self, accounting: Accounting, clear_fit_caches: Callable[[], None]) -> None:
        self._accounting = accounting
        self._clear_fit_caches = clear_fit_caches
        self.capacity = TopologyCapacity()
        self.placement = TopologyAdmission(self.capacity, accounting.flavors)
        self.waiting: set[str] = set()
        """ClusterQueues with workloads parked for want of room in a topology domain."""
        self.admission_hold: str | None = None
        """Why nothing is admitted now (waitForPodsReady's blockAdmission), if so."""

    def upsert_topology(self, topology: Topology) -> None:
        if self.capacity.upsert_topology(topology):
            self._accounting.unpark_everything()

    def delete_topology(self, name: str) -> None:
        if self.capacity.delete_topology(name):
            self._accounting.unpark_everything()

    def upsert_node(self, node: ClusterNode) -> None:
        """A node's labels, allocatable, taints, readiness (topology placement counts its room)."""
        if self.capacity.upsert_node(node):
            self.room_changed()

    def delete_node(self, name: str) -> None:
        if self.capacity.delete_node(name):
            self.room_changed()

    def upsert_pod(
        self, key: str, node: str, requests: Mapping[str, int], workload: str | None = None
    ) -> None:
        """A pod bound to ``node`` that has not finished, with its requests (milli-units) and the
        workload it belongs to, if any: while that workload holds a topology assignment the
        assignment accounts for the pod."""
        if self.capacity.upsert_pod(key, node, requests, workload):
            self.room_changed()

    def delete_pod(self, key: str) -> None:
        """The pod finished or is gone: its room is free."""
        if self.capacity.delete_pod(key):
            self.room_changed()

    def hold_admissions(self, reason: str | None) -> None:
        """Admit nothing while ``reason`` is set (a workload's pods are not ready yet, with
        waitForPodsReady's blockAdmission); ``None`` lifts the hold and wakes every queue."""
        if reason == self.admission_hold:
            return
        lifted = reason is None
        self.admission_hold = reason
        if lifted:
            self._accounting.unpark_everything()

    # ------------------------------------------------------------ queries

    def topology_room(self, flavor: str, level: str, resource: str) -> list[tuple[str, int, int]]:
        """Per domain of ``level`` in the flavor's topology: (value, free, allocatable) of
        ``resource``, in milli-units (empty: no such flavor, topology or level)."""
        spec = self._accounting.flavors.get(flavor)
        return [] if spec is None else self.capacity.room(spec, level, resource)

    def flavor_spec(self, name: str) -> ResourceFlavor | None:
        return self._accounting.flavors.get(name)

    def topology_spec(self, name: str) -> Topology | None:
        return self.capacity.topologies.get(name)

    def room_changed(self) -> None:
        """Room in a topology may have been freed: what waits for a domain is looked at again."""
        if not self.waiting:
            return
        self._clear_fit_caches()
        for name in self.waiting:
            cq = self._accounting.queues.get(name)
            if cq is not None:
                cq.unpark()
        self.waiting.clear()
