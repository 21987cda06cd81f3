"""Quota accounting: the cohort tree of ClusterQueues and the quota admitted workloads hold.

Kueue keeps this in its cache: the ClusterQueues, cohorts and flavors as configured, and per node
of the cohort tree the usage of what was admitted. Here the same: a workload is charged when
admitted (or restored at start-up), freed when its pods are gone, shrunk in place on a
scale-down; a ClusterQueue change updates the tree in place, a cohort change rebuilds it.
Which queue a pending workload waits in is :mod:`..engine.routing`'s business, and what to admit the
cycle's (:mod:`..engine.cycle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..admission_checks import CheckProblem
from ..decisions import PodSetAssignment, trimmed
from ..model import PODS, ClusterQueue, Cohort, FlavorResource, ResourceFlavor, Workload
from ..policies import BorrowWithinCohortPolicy, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from .cohorts import QuotaNode, QuotaTree, add_usage, available
from .state import NOTHING_PARKED, ClusterQueueState, Phase, WorkloadState


@dataclass(frozen=True, slots=True)
class ClusterQueueStatus:
    name: str
    pending: int
    admitted: int
    usage: Mapping[FlavorResource, int]
    borrowed: Mapping[FlavorResource, int]
    disabled_reason: str | None
    pending_inadmissible: int = 0
    """Of ``pending``, parked after not fitting (Kueue's ``status="inadmissible"``); the rest is
    awake for the next cycle (``status="active"``)."""
    check_problem: CheckProblem | None = None
    """A check it names is missing or inactive: it admits nothing (Active=False)."""
    awaiting_checks: int = 0
    """Of ``admitted``, those that reserved quota and wait for their admission checks."""

    @property
    def pending_active(self) -> int:
        return self.pending - self.pending_inadmissible


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One node of the cohort tree, for status reporting and invariant checks."""

    name: str
    is_cluster_queue: bool
    parent: str | None
    quota: Mapping[FlavorResource, tuple[int, int | None, int | None]]
    """(nominal, borrowing limit, lending limit) of the node's own quota"""
    subtree: Mapping[FlavorResource, int]
    guaranteed: Mapping[FlavorResource, int]
    usage: Mapping[FlavorResource, int]
    disabled_reason: str | None


class Accounting:
    def __init__(self) -> None:
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queue_specs: dict[str, ClusterQueue] = {}
        self.cohort_specs: dict[str, Cohort] = {}
        self.tree = QuotaTree()
        self.queues: dict[str, ClusterQueueState] = {}
        self.members: dict[QuotaNode, list[ClusterQueueState]] = {}
        """The ClusterQueues of each cohort tree, by its root."""
        self.deleting: set[str] = set()
        """Deleted ClusterQueues kept until their admitted workloads are released."""
        self.usage_epochs: dict[QuotaNode, int] = {}
        """Per cohort-tree root, bumped on every usage change in the tree."""
        self._config_epoch = 0
        """Bumped on every change of the tree: counts towards every root's usage epoch."""
        self._admission_seq = 0

    def members_of(self, cq: ClusterQueueState) -> Sequence[ClusterQueueState]:
        return self.members.get(cq.node.root(), (cq,))

    def usage_epoch(self, root: QuotaNode) -> int:
        # Both parts only grow, so any change to either gives a number never seen before.
        return self._config_epoch + self.usage_epochs.get(root, 0)

    def usage_changed(self, cq: ClusterQueueState) -> None:
        """The usage of ``cq``'s cohort tree changed: verdicts decided by it no longer stand."""
        root = cq.node.root()
        self.usage_epochs[root] = self.usage_epochs.get(root, 0) + 1

    # ------------------------------------------------------------------ charging and freeing

    def charge(
        self,
        wl: WorkloadState,
        cluster_queue: str,
        usage: dict[FlavorResource, int],
        pod_sets: tuple[PodSetAssignment, ...],
        *,
        cycle: int,
        now: float,
    ) -> None:
        """The workload holds `usage` in `cluster_queue` from now on (admitted or restored)."""
        cq = self.queues[cluster_queue]
        for fr, amount in usage.items():
            add_usage(cq.node, fr, amount)
        self.usage_changed(cq)
        self._admission_seq += 1
        wl.phase = Phase.ADMITTED
        wl.cluster_queue = cluster_queue
        wl.usage = usage
        wl.pod_sets = pod_sets
        wl.admitted_seq = self._admission_seq
        wl.admitted_cycle = cycle
        wl.admitted_at = now
        wl.reason = ""
        cq.admitted[wl.key] = wl

    def wake_possible_preemptors(self, wl: WorkloadState, cq: ClusterQueueState) -> None:
        """A fresh admission may be what a parked workload could preempt: let those try again."""
        priority = wl.spec.priority
        borrowing = any(cq.node.usage.get(fr, 0) > q.nominal for fr, q in cq.node.quota.items())
        for member in self.members_of(cq):
            if not member.has_parked:
                continue
            policy = member.spec.preemption
            if member is cq:
                within = policy.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
                if within and member.parked_top >= priority:
                    member.unpark()
            elif borrowing and (
                policy.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY
                or (
                    member.parked_top > priority
                    and (
                        policy.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
                        or policy.borrow_within_cohort.policy is not BorrowWithinCohortPolicy.NEVER
                    )
                )
            ):
                member.unpark()

    def free(self, wl: WorkloadState) -> ClusterQueueState | None:
        """Give back the quota an admitted or evicting workload holds; the queue it was freed in."""
        if wl.cluster_queue is None:
            return None
        cq = self.queues.get(wl.cluster_queue)
        if cq is None:
            return None
        for fr, amount in wl.usage.items():
            add_usage(cq.node, fr, -amount)
        self.usage_changed(cq)
        cq.admitted.pop(wl.key, None)
        wl.usage = {}
        wl.pod_sets = ()
        return cq

    def finish_deletion(self, cq: ClusterQueueState) -> bool:
        """A deleted ClusterQueue whose last admitted workload is gone may go away now
        (:meth:`remove_cluster_queue`)."""
        if cq.name not in self.deleting or cq.admitted:
            return False
        self.deleting.discard(cq.name)
        return True

    def scale_down(self, wl: WorkloadState, workload: Workload) -> ClusterQueueState:
        """An admitted workload needs less: charge the new demand on the admitted flavors."""
        flavors_of = {ps.name: ps.flavors for ps in wl.pod_sets}
        placed = {ps.name: ps.topology for ps in wl.pod_sets if ps.topology is not None}
        usage: dict[FlavorResource, int] = {}
        assignments: list[PodSetAssignment] = []
        for pod_set in workload.pod_sets:
            flavors = flavors_of.get(pod_set.name, {})
            # Admitted with a flavor for pods: its queue counts them, and the fewer pods free theirs.
            totals = pod_set.quota_totals(PODS in flavors)
            for resource, amount in totals.items():
                if resource not in flavors:
                    raise ValueError(
                        f"workload {wl.key}: pod set {pod_set.name} needs {resource} that its admission "
                        "does not cover; submit a replacement slice instead"
                    )
                fr = (flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
            topology = placed.get(pod_set.name)
            if topology is not None:
                topology = trimmed(topology, pod_set.count)
            assignments.append(PodSetAssignment(pod_set.name, pod_set.count, dict(flavors), totals, topology))
        for fr, amount in usage.items():
            if amount > wl.usage.get(fr, 0):
                raise ValueError(
                    f"workload {wl.key}: demand for {fr[1]} in flavor {fr[0]} grew while admitted; "
                    "submit a replacement slice (Workload.replaces) for a scale-up"
                )
        assert wl.cluster_queue is not None
        cq = self.queues[wl.cluster_queue]
        for fr in set(wl.usage) | set(usage):
            delta = usage.get(fr, 0) - wl.usage.get(fr, 0)
            if delta:
                add_usage(cq.node, fr, delta)
        self.usage_changed(cq)
        wl.usage = usage
        wl.pod_sets = tuple(assignments)
        return cq

    # ------------------------------------------------------------------ the tree

    def rebuild(self) -> list[WorkloadState]:
        """Rebuild the cohort tree from the specs; the pending workloads of ClusterQueues that
        no longer exist are returned (taken out of their groups) for routing to deal with."""
        self.tree.rebuild(self.cluster_queue_specs, self.cohort_specs)
        queues: dict[str, ClusterQueueState] = {}
        for name, spec in self.cluster_queue_specs.items():
            node = self.tree.cluster_queues[name]
            state = self.queues.get(name)
            if state is None:
                state = ClusterQueueState(spec, node)
            else:
                state.set_spec(spec, node)
            queues[name] = state
        orphans: list[WorkloadState] = []
        for name, state in self.queues.items():
            if name not in queues:
                for wl in state.pending_workloads():
                    if wl.group is not None:
                        wl.group.remove(wl)
                    orphans.append(wl)
        self.queues = queues
        self._regroup_members()
        return orphans

    def upsert_cluster_queue(self, spec: ClusterQueue) -> None:
        """One ClusterQueue added or changed, the rest of the tree updated in place: the same
        result as :meth:`rebuild`, at the cost of one path of the tree."""
        self.cluster_queue_specs[spec.name] = spec
        state = self.queues.get(spec.name)
        old_root = state.node.root() if state is not None else None
        node = self.tree.set_cluster_queue(spec, self.cohort_specs)
        if state is None:
            state = self.queues[spec.name] = ClusterQueueState(spec, node)
        else:
            state.set_spec(spec, node)
        root = node.root()
        if old_root is None:
            # The newest queue is last in queue order, as a rebuild would list it.
            self.members.setdefault(root, []).append(state)
        elif old_root is not root:
            self._regroup_members()
        self._config_epoch += 1

    def remove_cluster_queue(self, name: str) -> list[WorkloadState]:
        """A ClusterQueue gone for good (its spec already dropped); its pending workloads are
        returned, taken out of their groups, as :meth:`rebuild` returns them."""
        self.cluster_queue_specs.pop(name, None)
        state = self.queues.pop(name, None)
        self.tree.remove_cluster_queue(name, self.cohort_specs)
        orphans: list[WorkloadState] = []
        if state is not None:
            for wl in state.pending_workloads():
                if wl.group is not None:
                    wl.group.remove(wl)
                orphans.append(wl)
        self._regroup_members()
        return orphans

    def _regroup_members(self) -> None:
        self.members = {}
        # Verdicts naming a root must not stand: the tree changed.
        self._config_epoch += 1
        for state in self.queues.values():
            self.members.setdefault(state.node.root(), []).append(state)

    def unpark_members(self, cq: ClusterQueueState) -> None:
        for member in self.members_of(cq):
            member.unpark()

    def unpark_everything(self) -> None:
        for cq in self.queues.values():
            if cq.parked_groups:
                cq.unpark()
            else:
                cq.parked_top = NOTHING_PARKED

    # ------------------------------------------------------------------ queries

    def usage(self, cluster_queue: str) -> dict[FlavorResource, int]:
        return dict(self.queues[cluster_queue].node.usage)

    def available(self, cluster_queue: str, flavor: str, resource: str) -> int:
        return available(self.queues[cluster_queue].node, (flavor, resource))

    def cluster_queue_status(self, name: str) -> ClusterQueueStatus:
        cq = self.queues[name]
        node = cq.node
        borrowed = {
            fr: used - node.subtree.get(fr, 0)
            for fr, used in node.usage.items()
            if used > node.subtree.get(fr, 0)
        }
        awake, parked = cq.pending_counts()
        return ClusterQueueStatus(
            name,
            awake + parked,
            len(cq.admitted),
            dict(node.usage),
            borrowed,
            node.disabled_reason,
            parked,
        )

    def snapshot(self) -> list[NodeSnapshot]:
        """ClusterQueues, then cohorts, each by name."""
        nodes = [
            *sorted(self.tree.cluster_queues.values(), key=_name),
            *sorted(self.tree.cohorts.values(), key=_name),
        ]
        return [
            NodeSnapshot(
                node.name,
                node.is_cluster_queue,
                node.parent.name if node.parent is not None else None,
                {fr: (q.nominal, q.borrowing_limit, q.lending_limit) for fr, q in node.quota.items()},
                dict(node.subtree),
                dict(node.guaranteed),
                dict(node.usage),
                node.disabled_reason,
            )
            for node in nodes
        ]


def _name(node: QuotaNode) -> str:
    return node.name
