"""Kueue's preemption oracle for the workload a cycle is judging.

Flavor assignment asks it, per flavor and resource the workload falls short in, what preemption
could do there (:class:`~..flavors.assignment.Possibility`): nothing (no workload may be preempted for it),
reclaim (every victim is another queue's borrowed quota) or preempt (some victims are the queue's
own). The victims it finds are kept, so the cycle does not search again for the same need once
the flavor is chosen.

Most judgements need no search at all: victims are only ever workloads of the queue's cohort tree
admitted before the cycle (an admission of the same cycle is never undone), and a tree's
:class:`EarlierAdmissions` answer, once per cycle, whether it holds any. Where it holds none (a
cold start, a burst into an idle tree) or the queue's policy preempts nothing, the oracle answers
as a search would, without one: no candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..flavors.assignment import Possibility
from ..model import FlavorResource
from ..policies import BorrowWithinCohortPolicy, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from ..quota.cohorts import QuotaNode
from ..quota.fairsharing import FairSharing, fair_sharing_of
from ..quota.state import ClusterQueueState, Phase, WorkloadState
from .victims import Victims, find_victims


class EarlierAdmissions:
    """Per cohort tree (by its root), whether it holds a workload admitted before the cycle.

    Asked once per tree and cycle: during a cycle a workload only enters a tree's admitted
    workloads with that cycle's number (never a candidate), so a tree without one keeps none
    until the next cycle; a tree with one may lose it (a slice taking over its predecessor),
    which only costs a search that finds nothing.
    """

    def __init__(self) -> None:
        self._cycle: int | None = None
        self._found: dict[QuotaNode, bool] = {}

    def in_tree(self, root: QuotaNode, members: Sequence[ClusterQueueState], cycle: int) -> bool:
        if cycle != self._cycle:
            self._found.clear()
            self._cycle = cycle
        found = self._found.get(root)
        if found is None:
            found = self._found[root] = any(
                wl.admitted_cycle != cycle and wl.phase is not Phase.PENDING
                for member in members
                for wl in member.admitted.values()
            )
        return found


class VictimOracle:
    def __init__(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        members: Sequence[ClusterQueueState],
        queue_of: Callable[[str], ClusterQueueState],
        cycle: int,
        fair_sharing: bool | FairSharing | None,
        candidates_exist: bool = True,
    ) -> None:
        """``candidates_exist``: ``False`` when the cohort tree holds no workload admitted before
        this cycle (see :class:`EarlierAdmissions`), so no search could find a victim."""
        self._wl = wl
        self._cq = cq
        self._members = members
        self._queue_of = queue_of
        self._cycle = cycle
        self._fair_sharing = fair_sharing
        policy = cq.spec.preemption
        self._may_preempt = candidates_exist and (
            policy.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
            or policy.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
            or policy.borrow_within_cohort.policy is not BorrowWithinCohortPolicy.NEVER
        )
        self._found: dict[tuple[FlavorResource, int], Victims | None] = {}
        self.preempts_while_borrowing = (
            fair_sharing_of(fair_sharing) is not None
            and policy.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
        )
        """Fair sharing lets the queue reclaim while it borrows (Kueue's canPreemptWhileBorrowing)."""

    def __call__(self, fr: FlavorResource, amount: int) -> Possibility:
        if not self._may_preempt:
            return Possibility.NO_CANDIDATES
        victims = self._found[(fr, amount)] = self._search({fr: amount})
        if victims is None:
            return Possibility.NO_CANDIDATES
        if any(v.cluster_queue == self._cq.name for v in victims.workloads):
            return Possibility.PREEMPT
        return Possibility.RECLAIM

    def victims(self, need: Mapping[FlavorResource, int]) -> Victims | None:
        """The victims that let the workload fit ``need`` (the oracle's, if it was asked that)."""
        if len(need) == 1:
            ((fr, amount),) = need.items()
            if (fr, amount) in self._found:
                return self._found[(fr, amount)]
        return self._search(need)

    def _search(self, need: Mapping[FlavorResource, int]) -> Victims | None:
        if not self._may_preempt:
            return None  # what the search would find: no workload may be preempted
        return find_victims(
            self._wl, self._cq, need, self._members, self._queue_of, self._cycle, self._fair_sharing
        )
