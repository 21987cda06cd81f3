"""Free capacity per topology domain: the nodes, what runs on them, what admissions were given.

Kueue's TAS cache counts it the same way. A node offers its allocatable while it is Ready and
schedulable. From that are subtracted

- the pods that no topology assignment accounts for (DaemonSets, static pods, workloads of
  flavors without a topology: *external* pods, reported by the operator with their node), and
- the topology assignments of admitted workloads, charged at admission, before their pods
  exist, so two admissions in one cycle never take the same room. A pod of such a workload is
  not counted again while its workload's assignment is charged.

Domains are identified by their values along the topology's levels (a *leaf* has one value per
level). When the lowest level is ``kubernetes.io/hostname`` a leaf is one node; otherwise a leaf
pools the nodes of its lowest-level domain, as Kueue does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..decisions import TopologyAssignment
from ..model import HOSTNAME_LABEL, ClusterNode, ResourceFlavor, Toleration, Topology

LeafId = tuple[str, ...]
"""A leaf domain: one value per level of its topology, highest first."""

PODS = "pods"
POD_SLOT = 1000
"""Every pod takes one of its node's ``pods`` (milli-units, like every amount)."""
DEFAULT_MAX_PODS = 110
_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def with_pod_slot(requests: Mapping[str, int]) -> dict[str, int]:
    """Per-pod requests as a node sees them: the pod also takes one pod slot."""
    return {**requests, PODS: POD_SLOT}


def add_into(target: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for resource, amount in amounts.items():
        value = target.get(resource, 0) + sign * amount
        if value:
            target[resource] = value
        else:
            target.pop(resource, None)


@dataclass(frozen=True, slots=True)
class PodOnNode:
    node: str
    requests: Mapping[str, int]
    """with the pod slot"""
    workload: str | None


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """The nodes a pod set's pods may go to: its nodeSelector, and the taints it (with its
    flavor) tolerates. A value, so that what was counted for it can be kept."""

    selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def accepts(self, node: ClusterNode) -> bool:
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        return all(
            taint.effect not in _HARD_EFFECTS or any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
        )


@dataclass(frozen=True, slots=True)
class FlavorTopology:
    """The usable nodes of one flavor, grouped by leaf of the flavor's topology, and the tree
    of domains above them (``children[level][domain]``: its domains one level down)."""

    flavor: ResourceFlavor
    topology: Topology
    leaves: Mapping[LeafId, tuple[ClusterNode, ...]]
    children: tuple[Mapping[LeafId, tuple[LeafId, ...]], ...] = ()
    leaves_of_key: Mapping[LeafId, tuple[LeafId, ...]] = field(default_factory=dict)
    """charge key -> the leaves it is charged to (one: nodes sharing a hostname value are
    pooled into one leaf, see :func:`pool_shared_hostnames`)"""


def charge_key(levels: tuple[str, ...], values: tuple[str, ...]) -> LeafId:
    """Where a leaf's charges are kept: by node name alone when the levels end at nodes (as
    Kueue writes assignments then), so charges restored before the nodes are known still land
    on the right leaf; otherwise by the full path."""
    return values[-1:] if levels and levels[-1] == HOSTNAME_LABEL else values


def pool_shared_hostnames(leaves: Mapping[LeafId, list[ClusterNode]]) -> dict[LeafId, list[ClusterNode]]:
    """Leaves of a topology ending at hostnames, with the nodes that share a hostname label
    value pooled into one leaf (their room summed), placed where the first of them (by path)
    stands. Kueue's TAS cache keys such leaves by the hostname alone and does the same; real
    clusters have one node per hostname, where nothing changes."""
    first_of: dict[str, LeafId] = {}
    pooled: dict[LeafId, list[ClusterNode]] = {}
    for leaf in sorted(leaves):
        home = first_of.setdefault(leaf[-1], leaf)
        pooled.setdefault(home, []).extend(leaves[leaf])
    return pooled


def leaf_of(node: ClusterNode, topology: Topology) -> LeafId | None:
    values = tuple(node.labels.get(level) for level in topology.levels)
    if any(v is None for v in values):
        return None
    return values  # type: ignore[return-value]


class TopologyCapacity:
    def __init__(self) -> None:
        self.topologies: dict[str, Topology] = {}
        self.nodes: dict[str, ClusterNode] = {}
        self._external: dict[str, dict[str, int]] = {}
        """Per node, what external pods take."""
        self._pods: dict[str, PodOnNode] = {}
        self._pods_of: dict[str, set[str]] = {}
        """Per workload key, its pods' keys."""
        self._charges: dict[str, list[tuple[str, LeafId, dict[str, int]]]] = {}
        """Per placed workload: (topology, leaf, usage) charged for it."""
        self._owner_of: dict[str, str] = {}
        """Per placed workload, the key its pods are reported under."""
        self._placed_owners: dict[str, int] = {}
        """Per pod owner, how many of its workloads (slices) are placed: its pods are covered."""
        self._placed_usage: dict[tuple[str, LeafId], dict[str, int]] = {}
        self._views: dict[str, FlavorTopology] = {}
        self._counts: dict[tuple[str, NodeFilter, tuple[tuple[str, int], ...]], _Counted] = {}
        """Pods of one shape that fit per domain, per flavor and node filter: kept up to date
        leaf by leaf as admissions are charged and freed, dropped when anything else changes."""

    # ------------------------------------------------------------------ events

    def upsert_topology(self, topology: Topology) -> bool:
        if self.topologies.get(topology.name) == topology:
            return False
        self.topologies[topology.name] = topology
        self._layout_changed()
        return True

    def delete_topology(self, name: str) -> bool:
        if self.topologies.pop(name, None) is None:
            return False
        self._layout_changed()
        return True

    def upsert_node(self, node: ClusterNode) -> bool:
        if PODS not in node.allocatable:
            # A node that does not say how many pods it takes: the kubelet's default.
            node = replace(node, allocatable={**node.allocatable, PODS: DEFAULT_MAX_PODS * POD_SLOT})
        old = self.nodes.get(node.name)
        if old == node:
            return False
        self.nodes[node.name] = node
        self._layout_changed()
        return True

    def delete_node(self, name: str) -> bool:
        if self.nodes.pop(name, None) is None:
            return False
        self._layout_changed()
        return True

    def upsert_pod(self, key: str, node: str, requests: Mapping[str, int], workload: str | None) -> bool:
        """A pod bound to ``node`` that has not finished (terminating ones still hold room).
        Returns whether room may have been freed (the pod moved or shrank)."""
        pod = PodOnNode(node, with_pod_slot(requests), workload)
        old = self._pods.get(key)
        if old == pod:
            return False
        if old is not None:
            self._unlink(key, old)
        self._pods[key] = pod
        if workload is not None:
            self._pods_of.setdefault(workload, set()).add(key)
        if not self._covered(pod):
            add_into(self._external.setdefault(node, {}), pod.requests)
            self._counts.clear()
        return old is not None

    def delete_pod(self, key: str) -> bool:
        """The pod finished or is gone. Returns whether room was freed."""
        old = self._pods.pop(key, None)
        if old is None:
            return False
        self._unlink(key, old)
        return True

    def charge(
        self,
        workload: str,
        placements: Iterable[tuple[str, TopologyAssignment, Mapping[str, int]]],
        pod_owner: str | None = None,
    ) -> None:
        """``workload`` holds room from now on: per (topology, assignment, per-pod requests).
        Its pods (reported under ``pod_owner``, default ``workload``) no longer count apart."""
        charges = self._charges.setdefault(workload, [])
        newly_placed = len(charges) == 0
        touched: set[tuple[str, LeafId]] = set()
        for topology_name, assignment, requests in placements:
            per_pod = with_pod_slot(requests)
            for domain in assignment.domains:
                key = charge_key(assignment.levels, domain.values)
                usage = {r: q * domain.count for r, q in per_pod.items()}
                charges.append((topology_name, key, usage))
                add_into(self._placed_usage.setdefault((topology_name, key), {}), usage)
                touched.add((topology_name, key))
        if not charges:
            del self._charges[workload]
            return
        if newly_placed:
            owner = pod_owner or workload
            self._owner_of[workload] = owner
            self._placed_owners[owner] = self._placed_owners.get(owner, 0) + 1
            if self._placed_owners[owner] == 1 and self._pods_of.get(owner):
                # Its pods are accounted by the assignment from now on, not as external pods.
                for pod_key in self._pods_of[owner]:
                    pod = self._pods[pod_key]
                    add_into(self._external.setdefault(pod.node, {}), pod.requests, -1)
                self._counts.clear()
        self._recount(touched)

    def free(self, workload: str) -> bool:
        """The workload's assignment is given back. Returns whether it held any."""
        charges = self._charges.pop(workload, None)
        if charges is None:
            return False
        for topology_name, key, usage in charges:
            add_into(self._placed_usage.setdefault((topology_name, key), {}), usage, -1)
        owner = self._owner_of.pop(workload, workload)
        left = self._placed_owners.get(owner, 1) - 1
        if left > 0:
            self._placed_owners[owner] = left
        else:
            self._placed_owners.pop(owner, None)
            if self._pods_of.get(owner):
                for pod_key in self._pods_of[owner]:
                    pod = self._pods[pod_key]
                    add_into(self._external.setdefault(pod.node, {}), pod.requests)
                self._counts.clear()
        self._recount({(name, key) for name, key, _ in charges})
        return True

    def is_placed(self, workload: str) -> bool:
        return workload in self._charges

    # ------------------------------------------------------------------ queries

    def flavor_topology(self, flavor: ResourceFlavor) -> FlavorTopology | None:
        """The usable nodes of a flavor with a topology, by leaf (``None``: no such topology)."""
        if flavor.topology_name is None:
            return None
        topology = self.topologies.get(flavor.topology_name)
        if topology is None:
            return None
        view = self._views.get(flavor.name)
        if view is not None and view.flavor == flavor and view.topology == topology:
            return view
        leaves: dict[LeafId, list[ClusterNode]] = {}
        for node in self.nodes.values():
            if not node.usable or any(node.labels.get(k) != v for k, v in flavor.node_labels.items()):
                continue
            leaf = leaf_of(node, topology)
            if leaf is not None:
                leaves.setdefault(leaf, []).append(node)
        if topology.levels and topology.levels[-1] == HOSTNAME_LABEL:
            leaves = pool_shared_hostnames(leaves)
        ordered = sorted(leaves)
        depth = len(topology.levels)
        children: list[dict[LeafId, list[LeafId]]] = [{} for _ in range(depth)]
        for leaf in ordered:
            for i in range(1, depth):
                siblings = children[i - 1].setdefault(leaf[:i], [])
                if not siblings or siblings[-1] != leaf[: i + 1]:
                    siblings.append(leaf[: i + 1])
        leaves_of_key: dict[LeafId, list[LeafId]] = {}
        for leaf in ordered:
            leaves_of_key.setdefault(charge_key(topology.levels, leaf), []).append(leaf)
        view = FlavorTopology(
            flavor,
            topology,
            {leaf: tuple(leaves[leaf]) for leaf in ordered},
            tuple({d: tuple(c) for d, c in level.items()} for level in children),
            {key: tuple(keyed) for key, keyed in leaves_of_key.items()},
        )
        self._views[flavor.name] = view
        return view

    def leaf_free(self, view: FlavorTopology, leaf: LeafId, node_filter: NodeFilter) -> dict[str, int]:
        """What is free in a leaf on the nodes ``node_filter`` accepts."""
        free: dict[str, int] = {}
        for node in view.leaves[leaf]:
            if not node_filter.accepts(node):
                continue
            add_into(free, node.allocatable)
            external = self._external.get(node.name)
            if external:
                add_into(free, external, -1)
        placed = self._placed_usage.get((view.topology.name, charge_key(view.topology.levels, leaf)))
        if placed:
            add_into(free, placed, -1)
        return free

    def room(self, flavor: ResourceFlavor, level: str, resource: str) -> list[tuple[str, int, int]]:
        """Per domain of ``level`` of the flavor's topology: (domain value, free, allocatable) of
        ``resource`` on its usable nodes, for views (``rayquota explain``, the simulator)."""
        view = self.flavor_topology(flavor)
        if view is None or level not in view.topology.levels:
            return []
        depth = view.topology.levels.index(level) + 1
        everything = NodeFilter()
        totals: dict[LeafId, list[int]] = {}
        for leaf, nodes in view.leaves.items():
            free = self.leaf_free(view, leaf, everything).get(resource, 0)
            size = sum(n.allocatable.get(resource, 0) for n in nodes)
            entry = totals.setdefault(leaf[:depth], [0, 0])
            entry[0] += max(0, free)
            entry[1] += size
        return [(domain[-1], free, size) for domain, (free, size) in sorted(totals.items())]

    def charges_of(self, workload: str) -> list[tuple[str, LeafId, dict[str, int]]]:
        return self._charges.get(workload, [])

    def placed_workloads(self) -> Iterable[str]:
        return self._charges.keys()

    def pods_that_fit(
        self, view: FlavorTopology, node_filter: NodeFilter, per_pod: Mapping[str, int]
    ) -> list[dict[LeafId, int]]:
        """Per level (highest first), how many pods of ``per_pod`` (pod slot included) fit in
        each domain of the flavor's nodes that ``node_filter`` accepts. Shared: never mutate."""
        shape = tuple(sorted((r, q) for r, q in per_pod.items() if q > 0))
        cache_key = (view.flavor.name, node_filter, shape)
        counted = self._counts.get(cache_key)
        if counted is not None and counted.view is view:
            return counted.pods
        if len(self._counts) >= _MAX_COUNTED:
            self._counts.clear()
        depth = len(view.topology.levels)
        pods: list[dict[LeafId, int]] = [{} for _ in range(depth)]
        for leaf in view.leaves:
            fit = pods_fitting(self.leaf_free(view, leaf, node_filter), shape)
            for i in range(depth):
                prefix = leaf[: i + 1]
                pods[i][prefix] = pods[i].get(prefix, 0) + fit
        self._counts[cache_key] = _Counted(view, node_filter, shape, pods)
        return pods

    # ------------------------------------------------------------------ internals

    def _covered(self, pod: PodOnNode) -> bool:
        return pod.workload is not None and pod.workload in self._placed_owners

    def _unlink(self, key: str, pod: PodOnNode) -> None:
        if pod.workload is not None:
            keys = self._pods_of.get(pod.workload)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._pods_of[pod.workload]
        if not self._covered(pod):
            external = self._external.setdefault(pod.node, {})
            add_into(external, pod.requests, -1)
            if not external:
                del self._external[pod.node]
            self._counts.clear()

    def _layout_changed(self) -> None:
        self._views.clear()
        self._counts.clear()

    def _recount(self, touched: set[tuple[str, LeafId]]) -> None:
        """Charges changed on these leaves: the kept counts follow, leaf by leaf."""
        for counted in self._counts.values():
            view = counted.view
            depth = len(view.topology.levels)
            last = counted.pods[-1]
            for topology_name, key in touched:
                if topology_name != view.topology.name:
                    continue
                for leaf in view.leaves_of_key.get(key, ()):
                    free = self.leaf_free(view, leaf, counted.node_filter)
                    delta = pods_fitting(free, counted.shape) - last[leaf]
                    if delta:
                        for i in range(depth):
                            counted.pods[i][leaf[: i + 1]] += delta


_MAX_COUNTED = 512


@dataclass(slots=True)
class _Counted:
    view: FlavorTopology
    node_filter: NodeFilter
    shape: tuple[tuple[str, int], ...]
    pods: list[dict[LeafId, int]]


def pods_fitting(free: Mapping[str, int], shape: Iterable[tuple[str, int]]) -> int:
    """How many pods of per-pod ``shape`` fit in ``free``."""
    return min((max(0, free.get(r, 0)) // q for r, q in shape), default=0)
