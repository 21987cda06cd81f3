"""The cohort tree: quota and usage at every node, and how much each node may take.

Each ClusterQueue is a leaf; cohorts are inner nodes and may own quota too.
Per ``(flavor, resource)`` every node keeps:

- ``subtree``: the quota it brings: its own nominal quota plus what its
  children lend upwards;
- ``guaranteed``: the part of ``subtree`` it never lends (``subtree -
  lending_limit`` when a lending limit is set, else nothing);
- ``usage``: for a ClusterQueue, what its admitted workloads hold; for a
  cohort, what its children use beyond their guaranteed part.

A node may use its guaranteed part freely, and beyond it whatever its parent
can give, capped by its borrowing limit. Those rules applied at every level
are exactly the nominal/borrowing/lending invariants the tests check.

A ClusterQueue added, changed or removed is applied in place (:meth:`QuotaTree.set_cluster_queue`):
only the path from its leaf to the root is recomputed, from the difference the leaf makes to
what it lends and uses upwards. Rebuilding the whole tree on every upsert made configuring n
queues cost O(n^2) (seconds for a thousand). Cohort changes, which may create cycles, still
rebuild the tree (:meth:`QuotaTree.rebuild`); both ways give the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import networkx as nx

from ..model import ClusterQueue, Cohort, FlavorResource, ResourceGroup, ResourceQuota


@dataclass(slots=True, eq=False)
class QuotaNode:
    name: str
    is_cluster_queue: bool
    quota: dict[FlavorResource, ResourceQuota] = field(default_factory=dict)
    parent: QuotaNode | None = None
    children: list[QuotaNode] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    guaranteed: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    disabled_reason: str | None = None
    weight: float = 1.0
    """Its ``fairSharing.weight`` (a share is divided by it; 0: any borrowing is an infinite share)."""

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def ancestors(self) -> Iterator[QuotaNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, ResourceQuota]:
    out: dict[FlavorResource, ResourceQuota] = {}
    for group in groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                out[(flavor.flavor, resource)] = quota
    return out


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """How much more of ``fr`` the node may use now (may be negative after a quota cut)."""
    usage = node.usage.get(fr, 0)
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0) - usage
    guaranteed = node.guaranteed.get(fr, 0)
    local = guaranteed - usage if guaranteed > usage else 0
    from_parent = available(parent, fr)
    quota = node.quota.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        used_in_parent = usage - guaranteed if usage > guaranteed else 0
        cap = node.subtree.get(fr, 0) - guaranteed - used_in_parent + quota.borrowing_limit
        if cap < from_parent:
            from_parent = cap
    return local + from_parent


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most of ``fr`` the node could ever use with nothing else admitted anywhere: its own
    quota plus all its cohort could lend it, within its borrowing limit (Kueue's
    ``potentialAvailable``). A request beyond it can never be admitted."""
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0)
    ceiling = node.guaranteed.get(fr, 0) + potential_available(parent, fr)
    quota = node.quota.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        ceiling = min(ceiling, node.subtree.get(fr, 0) + quota.borrowing_limit)
    return ceiling


def add_usage(node: QuotaNode | None, fr: FlavorResource, delta: int) -> None:
    """Change a ClusterQueue's usage and carry the part beyond guaranteed up the tree."""
    while node is not None and delta:
        old = node.usage.get(fr, 0)
        new = old + delta
        if new:
            node.usage[fr] = new
        else:
            node.usage.pop(fr, None)
        guaranteed = node.guaranteed.get(fr, 0)
        delta = max(0, new - guaranteed) - max(0, old - guaranteed)
        node = node.parent


Contribution = tuple[dict[FlavorResource, int], dict[FlavorResource, int]]
"""What a node brings to its parent: (what it lends per key of its subtree, usage beyond its
guaranteed part where positive)."""


def contribution(node: QuotaNode) -> Contribution:
    lent = {fr: amount - node.guaranteed.get(fr, 0) for fr, amount in node.subtree.items()}
    beyond = {}
    for fr, used in node.usage.items():
        extra = used - node.guaranteed.get(fr, 0)
        if extra > 0:
            beyond[fr] = extra
    return lent, beyond


def set_guaranteed(node: QuotaNode) -> None:
    """The part of the node's subtree quota it never lends (only below a parent)."""
    node.guaranteed = {}
    if node.parent is None:
        return
    for fr, amount in node.subtree.items():
        quota = node.quota.get(fr)
        if quota is not None and quota.lending_limit is not None:
            node.guaranteed[fr] = max(0, amount - quota.lending_limit)


def _apply_child_change(parent: QuotaNode, old: Contribution, new: Contribution) -> None:
    (old_lent, old_beyond), (new_lent, new_beyond) = old, new
    for fr in old_lent.keys() | new_lent.keys():
        value = parent.subtree.get(fr, 0) + new_lent.get(fr, 0) - old_lent.get(fr, 0)
        # A key stays while the node's own quota or any child still has it (as a rebuild does).
        if fr in new_lent or fr in parent.quota or any(fr in c.subtree for c in parent.children):
            parent.subtree[fr] = value
        else:
            parent.subtree.pop(fr, None)
    for fr in old_beyond.keys() | new_beyond.keys():
        used = parent.usage.get(fr, 0) + new_beyond.get(fr, 0) - old_beyond.get(fr, 0)
        if used:
            parent.usage[fr] = used
        else:
            parent.usage.pop(fr, None)


def carry_up(parent: QuotaNode | None, old: Contribution, new: Contribution) -> None:
    """A child of ``parent`` now contributes ``new`` instead of ``old``: update the ancestors,
    stopping where nothing changes any more."""
    node = parent
    while node is not None and old != new:
        before = contribution(node)
        _apply_child_change(node, old, new)
        set_guaranteed(node)
        old, new = before, contribution(node)
        node = node.parent


class QuotaTree:
    """All ClusterQueue and cohort nodes: rebuilt when cohorts change, updated in place when a
    ClusterQueue does."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self.cycles: list[list[str]] = []

    def rebuild(self, cluster_queues: Mapping[str, ClusterQueue], cohorts: Mapping[str, Cohort]) -> None:
        old_usage = {name: node.usage for name, node in self.cluster_queues.items()}
        graph: nx.DiGraph = nx.DiGraph()
        for cohort in cohorts.values():
            graph.add_node(cohort.name)
            if cohort.parent:
                graph.add_edge(cohort.name, cohort.parent)
        for cq in cluster_queues.values():
            if cq.cohort:
                graph.add_node(cq.cohort)
        # Edges point child -> parent; every cohort has at most one parent, so
        # each cycle is simple and everything that can reach it hangs below it.
        self.cycles = sorted(sorted(str(n) for n in c) for c in nx.simple_cycles(graph))
        broken: dict[str, str] = {}
        for cycle in self.cycles:
            text = f"cohort cycle {' -> '.join([*cycle, cycle[0]])}"
            for member in cycle:
                broken.setdefault(member, text)
                for below in nx.ancestors(graph, member):
                    broken.setdefault(str(below), text)

        self.cohorts = {}
        for name in sorted(str(n) for n in graph.nodes):
            spec = cohorts.get(name)
            node = QuotaNode(name, False, quotas_of(spec.resource_groups) if spec else {})
            node.weight = spec.fair_sharing_weight if spec else 1.0
            node.disabled_reason = broken.get(name)
            self.cohorts[name] = node
        for name, node in self.cohorts.items():
            spec = cohorts.get(name)
            if node.disabled_reason is None and spec is not None and spec.parent:
                node.parent = self.cohorts[spec.parent]
                node.parent.children.append(node)

        self.cluster_queues = {}
        for name in sorted(cluster_queues):
            cq_spec = cluster_queues[name]
            node = QuotaNode(name, True, quotas_of(cq_spec.resource_groups))
            node.weight = cq_spec.fair_sharing_weight
            node.usage = old_usage.get(name, {})
            if cq_spec.cohort:
                cohort_node = self.cohorts[cq_spec.cohort]
                if cohort_node.disabled_reason is not None:
                    node.disabled_reason = cohort_node.disabled_reason
                else:
                    node.parent = cohort_node
                    cohort_node.children.append(node)
            self.cluster_queues[name] = node

        for node in self.cohorts.values():
            if node.parent is None and node.disabled_reason is None:
                self._compute(node)
        for node in self.cluster_queues.values():
            if node.parent is None:
                self._compute(node)

    def _compute(self, node: QuotaNode) -> None:
        """Fill subtree quota, guaranteed quota and (for cohorts) usage, bottom-up."""
        for child in node.children:
            self._compute(child)
        node.subtree = {fr: q.nominal for fr, q in node.quota.items()}
        if not node.is_cluster_queue:
            node.usage = {}
        for child in node.children:
            for fr, amount in child.subtree.items():
                lent = amount - child.guaranteed.get(fr, 0)
                node.subtree[fr] = node.subtree.get(fr, 0) + lent
            for fr, used in child.usage.items():
                beyond = used - child.guaranteed.get(fr, 0)
                if beyond > 0:
                    node.usage[fr] = node.usage.get(fr, 0) + beyond
        node.guaranteed = {}
        for fr, amount in node.subtree.items():
            quota = node.quota.get(fr)
            if node.parent is not None and quota is not None and quota.lending_limit is not None:
                node.guaranteed[fr] = max(0, amount - quota.lending_limit)

    # --- one ClusterQueue at a time -----------------------------------------------------------

    def set_cluster_queue(self, spec: ClusterQueue, cohorts: Mapping[str, Cohort]) -> QuotaNode:
        """Add or change one ClusterQueue; its usage is kept. Cohorts are as last rebuilt."""
        node = self.cluster_queues.get(spec.name)
        if node is None:
            node = self.cluster_queues[spec.name] = QuotaNode(spec.name, True)
        parent, disabled = self._cohort_for(spec.cohort)
        if node.parent is not parent or node.disabled_reason != disabled:
            self._detach(node, cohorts)
            node.disabled_reason = disabled
            node.parent = parent
            if parent is not None:
                parent.children.append(node)
            old: Contribution = ({}, {})
        else:
            old = contribution(node)
        node.quota = quotas_of(spec.resource_groups)
        node.weight = spec.fair_sharing_weight
        node.subtree = {fr: q.nominal for fr, q in node.quota.items()}
        set_guaranteed(node)
        carry_up(node.parent, old, contribution(node))
        return node

    def remove_cluster_queue(self, name: str, cohorts: Mapping[str, Cohort]) -> None:
        node = self.cluster_queues.pop(name, None)
        if node is not None:
            self._detach(node, cohorts)

    def _cohort_for(self, name: str | None) -> tuple[QuotaNode | None, str | None]:
        """The cohort node a ClusterQueue hangs below, created if only queues name it (such a
        cohort has no parent, so it closes no cycle); or why the queue hangs nowhere."""
        if not name:
            return None, None
        cohort = self.cohorts.get(name)
        if cohort is None:
            cohort = self.cohorts[name] = QuotaNode(name, False)
        if cohort.disabled_reason is not None:
            return None, cohort.disabled_reason
        return cohort, None

    def _detach(self, node: QuotaNode, cohorts: Mapping[str, Cohort]) -> None:
        parent = node.parent
        if parent is None:
            return
        old = contribution(node)
        parent.children.remove(node)
        node.parent = None
        carry_up(parent, old, ({}, {}))
        set_guaranteed(node)
        if not parent.children and parent.name not in cohorts:
            # Named by queues only, and none names it now: a rebuild would not have it.
            del self.cohorts[parent.name]


# --- how far up the tree a request must go ------------------------------------------------------


def _height(node: QuotaNode) -> int:
    """Distance to the furthest leaf below (a cohort with only queues below it: 1)."""
    height = 1 if node.children else 0
    for child in node.children:
        if not child.is_cluster_queue:
            height = max(height, _height(child) + 1)
    return height


def _lowest_fitting_subtree(node: QuotaNode, fr: FlavorResource, amount: int) -> tuple[int, bool]:
    """The height of the lowest subtree above the queue ``node`` whose own quota covers ``amount``
    more of ``fr`` (0: the queue's own nominal quota does), and whether that subtree lies below
    the root (Kueue's ``FindHeightOfLowestSubtreeThatFits``)."""
    if node.parent is None or node.usage.get(fr, 0) + amount <= node.subtree.get(fr, 0):
        return 0, node.parent is not None
    remaining = amount - max(0, node.guaranteed.get(fr, 0) - node.usage.get(fr, 0))
    for ancestor in node.ancestors():
        if ancestor.usage.get(fr, 0) + remaining <= ancestor.subtree.get(fr, 0):
            return _height(ancestor), ancestor.parent is not None
        remaining -= max(0, ancestor.guaranteed.get(fr, 0) - ancestor.usage.get(fr, 0))
    return _height(node.root()), False


def borrowing_level(node: QuotaNode, fr: FlavorResource, amount: int) -> int:
    """How far up the cohort tree the queue must borrow to take ``amount`` more of ``fr``: 0
    within its nominal quota, else the height of the lowest cohort whose subtree quota covers it
    (a cycle's borrowers go lowest level first, before priority, as in Kueue)."""
    return _lowest_fitting_subtree(node, fr, amount)[0]


def may_reclaim_in_hierarchy(node: QuotaNode, fr: FlavorResource, amount: int) -> bool:
    """Does ``amount`` more of ``fr`` fit the quota of a subtree below the root (so the queue's
    branch may reclaim it from workloads elsewhere in the tree, Kueue's ``mayReclaimInHierarchy``)?"""
    return _lowest_fitting_subtree(node, fr, amount)[1]
