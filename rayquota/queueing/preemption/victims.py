"""Choosing victims: the smallest set of admitted workloads whose removal lets a workload fit.

The rules are Kueue v0.19's classical preemption, so a manifest written for Kueue evicts what it
would evict there (tests/conformance holds Kueue's own cases):

- Only workloads using a flavor-resource the preemptor cannot get without preemption are
  candidates ("short" below).
- ``withinClusterQueue``: workloads of the same queue, by priority (and age, with
  ``LowerOrNewerEqualPriority``).
- Other queues of the cohort tree (``reclaimWithinCohort``): walking up from the preemptor's
  cohort, each subtree is searched for queues (and cohorts) using more than their own quota. A
  candidate found in the first subtree whose quota covers the preemptor's request, or in any
  above it, is a **hierarchical reclaim**: the preemptor's branch has a better right to that
  quota, so it may be taken even while the preemptor borrows. Below that subtree a candidate is
  a plain reclaim: taken only if the preemptor does not borrow afterwards, unless
  ``borrowWithinCohort`` allows it for lower priorities (at or below ``maxPriorityThreshold``).
  With policy ``Any`` a borrower's workload of equal or higher priority may go too.
- A candidate of another queue stays valid only while that queue, and every cohort between it
  and the subtree where it was found, still uses more than its own quota: removals made for the
  same preemptor may bring it back within it.

Candidates are ordered: already being evicted first, then hierarchical reclaims, plain reclaims,
the preemptor's own queue; within each, lower priority, then most recently admitted. They are
removed one by one until the workload fits; then each removed one, newest choice first, is put
back if the workload still fits without its removal. First tried while borrowing is allowed, then
without (or the reverse when only a plain reclaim below nominal can help). Removals are simulated
on the live usage and always undone: quota is released only when the operator says the victims'
pods are gone.

With fair sharing on, Kueue (and so rayquota) chooses victims differently: see
:mod:`.fair_victims`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from enum import Enum

from ..decisions import PreemptionReason
from ..model import FlavorResource
from ..policies import BorrowWithinCohortPolicy, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from ..quota.cohorts import QuotaNode, add_usage, available
from ..quota.fairsharing import FairSharing, fair_sharing_of
from ..quota.state import ClusterQueueState, Phase, WorkloadState
from .fair_victims import FairCandidate, fair_victims


@dataclass(slots=True)
class Victims:
    workloads: list[WorkloadState]
    kinds: dict[str, PreemptionReason]


class Variant(Enum):
    """Why a candidate may be preempted, and so when (Kueue's preemption variants)."""

    WITHIN_QUEUE = PreemptionReason.IN_CLUSTER_QUEUE
    HIERARCHICAL_RECLAIM = PreemptionReason.RECLAIM_WITHIN_COHORT
    """The preemptor's branch of the tree owns the quota the candidate uses: even while borrowing."""
    RECLAIM_WITHOUT_BORROWING = "reclaim-without-borrowing"
    """Only if the preemptor then fits without borrowing."""
    RECLAIM_WHILE_BORROWING = PreemptionReason.BORROW_WITHIN_COHORT

    @property
    def reason(self) -> PreemptionReason:
        if self is Variant.RECLAIM_WITHOUT_BORROWING:
            return PreemptionReason.RECLAIM_WITHIN_COHORT
        return PreemptionReason(self.value)


@dataclass(slots=True)
class Candidate:
    workload: WorkloadState
    owner: ClusterQueueState
    variant: Variant
    found_in: QuotaNode | None
    """The subtree root (a cohort) where it was found; ``None`` in the preemptor's own queue."""


def same_queue_eligible(
    preemptor: WorkloadState, victim: WorkloadState, policy: WithinClusterQueuePolicy
) -> bool:
    if policy is WithinClusterQueuePolicy.NEVER:
        return False
    mine, theirs = preemptor.spec.priority, victim.spec.priority
    if theirs < mine:
        return True
    return (
        policy is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        and theirs == mine
        and victim.queued_at > preemptor.queued_at
    )


def _reclaim_eligible(
    preemptor: WorkloadState, victim: WorkloadState, policy: ReclaimWithinCohortPolicy
) -> bool:
    if policy is ReclaimWithinCohortPolicy.ANY:
        return True
    return (
        policy is ReclaimWithinCohortPolicy.LOWER_PRIORITY and victim.spec.priority < preemptor.spec.priority
    )


def within_own_quota(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """Does the node (a queue or a cohort) use no more than its subtree's quota in every ``fr``?"""
    usage, subtree = node.usage, node.subtree
    return all(usage.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)


def _local_available(node: QuotaNode, fr: FlavorResource) -> int:
    """Quota the node keeps for its subtree (never lent) and does not use."""
    return max(0, node.guaranteed.get(fr, 0) - node.usage.get(fr, 0))


def _fits_in_quota(
    node: QuotaNode, requests: Mapping[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Would ``requests`` fit the node's own subtree quota; and what remains for the level above
    once its unlent, unused quota is taken."""
    fits = all(node.usage.get(fr, 0) + v <= node.subtree.get(fr, 0) for fr, v in requests.items())
    remaining = {fr: max(0, v - _local_available(node, fr)) for fr, v in requests.items()}
    return fits, remaining


def _subtree_cluster_queues(
    node: QuotaNode, skip: QuotaNode | None, short: tuple[FlavorResource, ...]
) -> list[QuotaNode]:
    """Queues below ``node`` using more than their quota, not descending into ``skip`` or into a
    cohort within its own quota."""
    found: list[QuotaNode] = []
    only = short[0] if len(short) == 1 else None
    for child in node.children:
        if child is skip:
            continue
        # Inlined for one flavor-resource: this runs for every queue of the tree on every search.
        if only is not None:
            if child.usage.get(only, 0) <= child.subtree.get(only, 0):
                continue
        elif within_own_quota(child, short):
            continue
        if child.is_cluster_queue:
            found.append(child)
        else:
            found.extend(_subtree_cluster_queues(child, None, short))
    return found


@dataclass(slots=True)
class _Search:
    preemptor: WorkloadState
    cq: ClusterQueueState
    need: Mapping[FlavorResource, int]
    short: tuple[FlavorResource, ...]
    queue_of: Callable[[str], ClusterQueueState]
    cycle: int
    members: Iterable[ClusterQueueState] = ()

    def eligible(self, victim: WorkloadState) -> bool:
        return (
            victim.phase is not Phase.PENDING
            and victim.admitted_cycle != self.cycle  # never undo an admission of this same cycle
            and victim.key != self.preemptor.key
            and victim.key != self.preemptor.spec.replaces
            and not victim.usage.keys().isdisjoint(self.short)
        )

    def own_queue(self) -> list[Candidate]:
        policy = self.cq.spec.preemption.within_cluster_queue
        return [
            Candidate(v, self.cq, Variant.WITHIN_QUEUE, None)
            for v in self.cq.admitted.values()
            if same_queue_eligible(self.preemptor, v, policy) and self.eligible(v)  # the cheap rule first
        ]

    def classify(self, victim: WorkloadState, advantage: bool) -> Variant | None:
        policy = self.cq.spec.preemption
        if not _reclaim_eligible(self.preemptor, victim, policy.reclaim_within_cohort):
            return None
        if advantage:
            return Variant.HIERARCHICAL_RECLAIM
        borrow = policy.borrow_within_cohort
        if borrow.policy is BorrowWithinCohortPolicy.NEVER:
            return Variant.RECLAIM_WITHOUT_BORROWING
        theirs = victim.spec.priority
        threshold = borrow.max_priority_threshold
        if theirs >= self.preemptor.spec.priority or (threshold is not None and theirs > threshold):
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING

    def other_queues(self) -> list[Candidate]:
        """Candidates up the cohort tree, each subtree searched once (Kueue's hierarchical reclaim)."""
        node = self.cq.node
        if (
            node.parent is None
            or self.cq.spec.preemption.reclaim_within_cohort is ReclaimWithinCohortPolicy.NEVER
        ):
            return []
        # The walk first: most searches find no queue over its quota, and then need no more.
        levels: list[tuple[QuotaNode, list[QuotaNode]]] = []
        previous: QuotaNode | None = None
        for subtree in node.ancestors():
            leaves = _subtree_cluster_queues(subtree, previous, self.short)
            levels.append((subtree, [leaf for leaf in leaves if leaf is not node]))
            previous = subtree
        if not any(over for _, over in levels):
            return []
        found: list[Candidate] = []
        advantage, remaining = _fits_in_quota(node, self.need)
        for subtree, leaves in levels:
            for leaf in leaves:
                owner = self.queue_of(leaf.name)
                for victim in owner.admitted.values():
                    if not self.eligible(victim):
                        continue
                    variant = self.classify(victim, advantage)
                    if variant is not None:
                        found.append(Candidate(victim, owner, variant, subtree))
            fits, remaining = _fits_in_quota(subtree, remaining)
            advantage = advantage or fits
        return found

    def fair_candidates(self) -> list[FairCandidate]:
        """Fair sharing's candidates: the own queue's by policy, and those of every queue of the
        tree that borrows (beyond its nominal quota) in a resource needing preemption."""
        found = [FairCandidate(c.workload, self.cq) for c in self.own_queue()]
        policy = self.cq.spec.preemption.reclaim_within_cohort
        node = self.cq.node
        if node.parent is None or policy is ReclaimWithinCohortPolicy.NEVER:
            return found
        for owner in self.members:
            if owner is self.cq or not _borrows_in(owner.node, self.short):
                continue
            found.extend(
                FairCandidate(v, owner)
                for v in owner.admitted.values()
                if _reclaim_eligible(self.preemptor, v, policy) and self.eligible(v)
            )
        return found

    def still_valid(self, candidate: Candidate, allow_borrowing: bool) -> bool:
        """Removals for this preemptor may have brought the candidate's branch back within its quota."""
        if candidate.owner is self.cq:
            return True
        if allow_borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        node: QuotaNode | None = candidate.owner.node
        while node is not None and node is not candidate.found_in:
            if within_own_quota(node, self.short):
                return False
            node = node.parent
        return True

    def fits(self, allow_borrowing: bool) -> bool:
        node = self.cq.node
        for fr, amount in self.need.items():
            quota = node.quota.get(fr)
            if not allow_borrowing and node.usage.get(fr, 0) + amount > (quota.nominal if quota else 0):
                return False
            if amount > available(node, fr):
                return False
        return True


def _order_key(candidate: Candidate) -> tuple[bool, int, int]:
    victim = candidate.workload
    return (victim.phase is not Phase.EVICTING, victim.spec.priority, -victim.admitted_seq)


def _in_order(
    hierarchical: list[Candidate], reclaims: list[Candidate], own: list[Candidate]
) -> list[Candidate]:
    """Being evicted first; then hierarchical reclaims, plain reclaims, the own queue; each
    by lower priority, then most recently admitted."""
    lists = [sorted(group, key=_order_key) for group in (hierarchical, reclaims, own)]
    evicting = [c for group in lists for c in group if c.workload.phase is Phase.EVICTING]
    rest = [c for group in lists for c in group if c.workload.phase is not Phase.EVICTING]
    return evicting + rest


def _borrows_in(node: QuotaNode, short: Iterable[FlavorResource]) -> bool:
    for fr in short:
        quota = node.quota.get(fr)
        if node.usage.get(fr, 0) > (quota.nominal if quota else 0):
            return True
    return False


def short_of(cq: ClusterQueueState, need: Mapping[FlavorResource, int]) -> tuple[FlavorResource, ...]:
    """The flavor-resources the workload cannot get without preemption."""
    return tuple(fr for fr, amount in need.items() if amount > available(cq.node, fr))


def find_victims(
    preemptor: WorkloadState,
    cq: ClusterQueueState,
    need: Mapping[FlavorResource, int],
    tree_members: Iterable[ClusterQueueState],
    queue_of: Callable[[str], ClusterQueueState],
    cycle: int,
    fair_sharing: bool | FairSharing | None,
    short: Set[FlavorResource] | None = None,
) -> Victims | None:
    """Return a minimal victim set that lets ``preemptor`` fit, or ``None``.

    ``short``: the flavor-resources that need preemption (by default those where ``need``
    exceeds what is available now). ``tree_members``: the queues of the cohort tree (read by
    fair sharing; the classical search walks the tree from the queue's own node).
    ``fair_sharing``: its settings (``True``: Kueue's defaults), or off.
    """
    search = _Search(
        preemptor,
        cq,
        need,
        tuple(short) if short is not None else short_of(cq, need),
        queue_of,
        cycle,
        tree_members,
    )
    if not search.short:
        return None
    settings = fair_sharing_of(fair_sharing)
    if settings is not None:
        fair = fair_victims(
            cq, need, search.short, search.fair_candidates(), lambda: search.fits(True), settings
        )
        if fair is None:
            return None
        return Victims([c.workload for c in fair], {c.workload.key: c.reason for c in fair})
    own = search.own_queue()
    others = search.other_queues()
    if not own and not others:
        return None  # nothing to remove: the greedy search below would find nothing either
    hierarchical = [c for c in others if c.variant is Variant.HIERARCHICAL_RECLAIM]
    reclaims = [c for c in others if c.variant is not Variant.HIERARCHICAL_RECLAIM]
    candidates = _in_order(hierarchical, reclaims, own)

    policy = cq.spec.preemption
    borrowing_forbidden = policy.borrow_within_cohort.policy is BorrowWithinCohortPolicy.NEVER
    if not others or (borrowing_forbidden and not _under_nominal(cq, search.short)):
        attempts = [True]
    elif borrowing_forbidden and not hierarchical:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        chosen = _greedy(search, candidates, allow_borrowing)
        if chosen is not None:
            return Victims([c.workload for c in chosen], {c.workload.key: c.variant.reason for c in chosen})
    return None


def _under_nominal(cq: ClusterQueueState, short: Iterable[FlavorResource]) -> bool:
    """Is the queue below its nominal quota in every resource needing preemption (Kueue's
    ``queueUnderNominalInResourcesNeedingPreemption``)?"""
    node = cq.node
    for fr in short:
        quota = node.quota.get(fr)
        if node.usage.get(fr, 0) >= (quota.nominal if quota else 0):
            return False
    return True


def _move(candidate: Candidate, sign: int) -> None:
    for fr, amount in candidate.workload.usage.items():
        add_usage(candidate.owner.node, fr, sign * amount)


def _greedy(search: _Search, candidates: list[Candidate], allow_borrowing: bool) -> list[Candidate] | None:
    removed: list[Candidate] = []
    fitted = False
    for candidate in candidates:
        if not search.still_valid(candidate, allow_borrowing):
            continue
        _move(candidate, -1)
        removed.append(candidate)
        if search.fits(allow_borrowing):
            fitted = True
            break
    if not fitted:
        for candidate in removed:
            _move(candidate, +1)
        return None
    # Put back every victim whose removal turned out unnecessary, newest choice first.
    for candidate in reversed(removed[:-1]):
        _move(candidate, +1)
        if search.fits(allow_borrowing):
            removed.remove(candidate)
        else:
            _move(candidate, -1)
    for candidate in removed:
        _move(candidate, +1)
    return removed
