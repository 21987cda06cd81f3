"""Topology and admission holds in the engine's memory: the events that feed topology placement
(Topologies, Nodes, the pods bound to them) and its queries, kept apart from the quota events.

:class:`TopologyEvents` is a part of :class:`~.engine_events.EngineEvents`: it holds the room per
domain (:mod:`.topology_capacity`) and wakes the queues whose workloads wait for room when room
is freed.
"""

from __future__ import annotations

from collections.abc import Mapping

from .accounting import Accounting
from .model import ClusterNode, ResourceFlavor, Topology
from .topology_admission import TopologyAdmission
from .topology_capacity import TopologyCapacity


class TopologyEvents:
    _accounting: Accounting

    def _init_topology(self) -> None:
        self._topology = TopologyCapacity()
        self._placement = TopologyAdmission(self._topology, self._accounting.flavors)
        self._topology_waiting: set[str] = set()
        """ClusterQueues with workloads parked for want of room in a topology domain."""
        self._admission_hold: str | None = None
        """Why nothing is admitted now (waitForPodsReady's blockAdmission), if so."""

    def _clear_fit_caches(self) -> None:
        raise NotImplementedError

    def upsert_topology(self, topology: Topology) -> None:
        if self._topology.upsert_topology(topology):
            self._accounting.unpark_everything()

    def delete_topology(self, name: str) -> None:
        if self._topology.delete_topology(name):
            self._accounting.unpark_everything()

    def upsert_node(self, node: ClusterNode) -> None:
        """A node's labels, allocatable, taints, readiness (topology placement counts its room)."""
        if self._topology.upsert_node(node):
            self._topology_room_changed()

    def delete_node(self, name: str) -> None:
        if self._topology.delete_node(name):
            self._topology_room_changed()

    def upsert_pod(
        self, key: str, node: str, requests: Mapping[str, int], workload: str | None = None
    ) -> None:
        """A pod bound to ``node`` that has not finished, with its requests (milli-units) and the
        workload it belongs to, if any: while that workload holds a topology assignment the
        assignment accounts for the pod."""
        if self._topology.upsert_pod(key, node, requests, workload):
            self._topology_room_changed()

    def delete_pod(self, key: str) -> None:
        """The pod finished or is gone: its room is free."""
        if self._topology.delete_pod(key):
            self._topology_room_changed()

    def hold_admissions(self, reason: str | None) -> None:
        """Admit nothing while ``reason`` is set (a workload's pods are not ready yet, with
        waitForPodsReady's blockAdmission); ``None`` lifts the hold and wakes every queue."""
        if reason == self._admission_hold:
            return
        lifted = reason is None
        self._admission_hold = reason
        if lifted:
            self._accounting.unpark_everything()

    # ------------------------------------------------------------ queries

    def topology_room(self, flavor: str, level: str, resource: str) -> list[tuple[str, int, int]]:
        """Per domain of ``level`` in the flavor's topology: (value, free, allocatable) of
        ``resource``, in milli-units (empty: no such flavor, topology or level)."""
        spec = self._accounting.flavors.get(flavor)
        return [] if spec is None else self._topology.room(spec, level, resource)

    def flavor_spec(self, name: str) -> ResourceFlavor | None:
        return self._accounting.flavors.get(name)

    def topology_spec(self, name: str) -> Topology | None:
        return self._topology.topologies.get(name)

    def _topology_room_changed(self) -> None:
        """Room in a topology may have been freed: what waits for a domain is looked at again."""
        if not self._topology_waiting:
            return
        self._clear_fit_caches()
        for name in self._topology_waiting:
            cq = self._accounting.queues.get(name)
            if cq is not None:
                cq.unpark()
        self._topology_waiting.clear()
