"""Choosing victims: the smallest set of admitted workloads whose removal lets a workload fit.

Candidates follow the ClusterQueue's preemption policy:

- ``withinClusterQueue``: lower-priority (or equal-priority newer) workloads
  of the same queue;
- ``reclaimWithinCohort``: workloads of other queues in the cohort tree that
  are borrowing, so the preemptor gets its nominal quota back. A victim of
  equal or higher priority than the preemptor (policy ``Any``) is taken only
  if its queue stays at or above nominal without it: otherwise reclaiming a
  little would free a lot, and the surplus would be borrowed and reclaimed
  again in a cascade that never settles;
- ``borrowWithinCohort``: lower-priority borrowers of other queues (at or
  below ``maxPriorityThreshold``) even if the preemptor itself borrows.

Without borrowing first, with all candidates, only when other queues' workloads can be
reclaimed and the queue is still under nominal quota where the workload falls short; then with
borrowing, the queue's own workloads (Kueue v0.19's classical preemption does the same: a queue
at nominal that evicted its own workloads down to nominal minus the need would evict more than
the room it lacks). Candidates are ordered borrowers in other queues first, then lower priority,
then most recently admitted. They are removed one by one until the workload
fits; then each removed one, newest decision first, is put back if the
workload still fits without its removal. Removals are simulated on the live
usage and always undone: quota is released only when the operator says the
victims' pods are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .cohorts import add_usage, available
from .decisions import PreemptionReason
from .fairsharing import dominant_share
from .model import FlavorResource
from .policies import BorrowWithinCohortPolicy, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from .state import ClusterQueueState, Phase, WorkloadState


@dataclass(slots=True)
class Victims:
    workloads: list[WorkloadState]
    kinds: dict[str, PreemptionReason]


def _fits(cq: ClusterQueueState, need: Mapping[FlavorResource, int], allow_borrowing: bool) -> bool:
    node = cq.node
    for fr, amount in need.items():
        if amount > available(node, fr):
            return False
        if not allow_borrowing and node.usage.get(fr, 0) + amount > node.quota[fr].nominal:
            return False
    return True


def _borrowing(cq: ClusterQueueState, need: Mapping[FlavorResource, int]) -> bool:
    node = cq.node
    for fr in need:
        quota = node.quota.get(fr)
        if node.usage.get(fr, 0) > (quota.nominal if quota else 0):
            return True
    return False


def _purely_borrowed(
    victim: WorkloadState, owner: ClusterQueueState, need: Mapping[FlavorResource, int]
) -> bool:
    """Would the victim's queue stay at or above its nominal quota without it?"""
    node = owner.node
    for fr, amount in victim.usage.items():
        if fr in need:
            quota = node.quota.get(fr)
            if node.usage.get(fr, 0) - amount < (quota.nominal if quota else 0):
                return False
    return True


def _under_nominal_where_short(cq: ClusterQueueState, need: Mapping[FlavorResource, int]) -> bool:
    """Is the queue below its nominal quota in every resource the workload cannot get without
    preemption (Kueue's ``queueUnderNominalInResourcesNeedingPreemption``)?"""
    node = cq.node
    for fr, amount in need.items():
        if amount > available(node, fr):
            quota = node.quota.get(fr)
            if node.usage.get(fr, 0) >= (quota.nominal if quota else 0):
                return False
    return True


def _shift(wl: WorkloadState, cq: ClusterQueueState, sign: int) -> None:
    for fr, amount in wl.usage.items():
        add_usage(cq.node, fr, sign * amount)


def _overlaps(wl: WorkloadState, need: Mapping[FlavorResource, int]) -> bool:
    return not need.keys().isdisjoint(wl.usage)


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
        and victim.spec.created > preemptor.spec.created
    )


def find_victims(
    preemptor: WorkloadState,
    cq: ClusterQueueState,
    need: Mapping[FlavorResource, int],
    tree_members: Iterable[ClusterQueueState],
    queue_of: Callable[[str], ClusterQueueState],
    cycle: int,
    fair_sharing: bool,
) -> Victims | None:
    """Return a minimal victim set that lets ``preemptor`` fit, or ``None``."""
    policy = cq.spec.preemption
    priority = preemptor.spec.priority

    def eligible(victim: WorkloadState) -> bool:
        # A workload already being evicted counts (first, see below): its quota is leaving
        # anyway, and taking it evicts nobody new (Kueue orders evicted candidates first too).
        return (
            victim.phase is not Phase.PENDING
            and victim.admitted_cycle != cycle  # never undo an admission of this same cycle
            and victim.key != preemptor.key
            and victim.key != preemptor.spec.replaces
            and _overlaps(victim, need)
        )

    same = [
        v
        for v in cq.admitted.values()
        if same_queue_eligible(preemptor, v, policy.within_cluster_queue) and eligible(v)
    ]
    reclaim: list[WorkloadState] = []
    borrow: list[WorkloadState] = []
    if cq.node.parent is not None:
        threshold = policy.borrow_within_cohort.max_priority_threshold
        for other in tree_members:
            # Only what another queue borrows can be taken from it (see _greedy), and removals
            # only lower its usage: a queue not borrowing now offers no victim at all.
            if other is cq or not other.admitted or not _borrowing(other, need):
                continue
            for v in other.admitted.values():
                if not eligible(v):
                    continue
                p = v.spec.priority
                if policy.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY or (
                    policy.reclaim_within_cohort is ReclaimWithinCohortPolicy.LOWER_PRIORITY and p < priority
                ):
                    reclaim.append(v)
                if (
                    policy.borrow_within_cohort.policy is BorrowWithinCohortPolicy.LOWER_PRIORITY
                    and p < priority
                    and (threshold is None or p <= threshold)
                ):
                    borrow.append(v)

    attempts: list[tuple[list[WorkloadState], bool, PreemptionReason]] = []
    if reclaim and _under_nominal_where_short(cq, need):
        # Reclaiming means fitting within nominal quota, so only a queue still under it may try;
        # one at or above it would have to evict its own workloads down to nominal minus the
        # need, more than borrowing the room back takes (Kueue v0.19's classical preemption:
        # allowBorrowing=false only while the queue is under nominal where preemption is needed).
        attempts.append((reclaim + same, False, PreemptionReason.RECLAIM_WITHIN_COHORT))
    if borrow:
        attempts.append((borrow + same, True, PreemptionReason.BORROW_WITHIN_COHORT))
    if same:
        attempts.append((same, True, PreemptionReason.IN_CLUSTER_QUEUE))
    my_share = dominant_share(cq, need) if fair_sharing else 0
    for candidates, allow_borrowing, cohort_kind in attempts:
        if not _could_fit(cq, need, candidates, allow_borrowing):
            continue
        candidates.sort(
            key=lambda v: (
                v.phase is not Phase.EVICTING,
                v.cluster_queue == cq.name,
                v.spec.priority,
                -v.admitted_seq,
            )
        )
        chosen = _greedy(cq, need, candidates, allow_borrowing, queue_of, fair_sharing, my_share, priority)
        if chosen is not None:
            kinds = {
                v.key: PreemptionReason.IN_CLUSTER_QUEUE
                if v.cluster_queue == cq.name
                else (PreemptionReason.FAIR_SHARING if fair_sharing else cohort_kind)
                for v in chosen
            }
            return Victims(chosen, kinds)
    return None


def _could_fit(
    cq: ClusterQueueState,
    need: Mapping[FlavorResource, int],
    candidates: list[WorkloadState],
    allow_borrowing: bool,
) -> bool:
    """A cheap upper bound: even removing every candidate, could the workload fit?"""
    node = cq.node
    freeable: dict[FlavorResource, int] = {}
    own: dict[FlavorResource, int] = {}
    for v in candidates:
        for fr, amount in v.usage.items():
            if fr in need:
                freeable[fr] = freeable.get(fr, 0) + amount
                if v.cluster_queue == cq.name:
                    own[fr] = own.get(fr, 0) + amount
    for fr, amount in need.items():
        if amount > available(node, fr) + freeable.get(fr, 0):
            return False
        if not allow_borrowing and node.usage.get(fr, 0) - own.get(fr, 0) + amount > node.quota[fr].nominal:
            return False
    return True


def _greedy(
    cq: ClusterQueueState,
    need: Mapping[FlavorResource, int],
    candidates: list[WorkloadState],
    allow_borrowing: bool,
    queue_of: Callable[[str], ClusterQueueState],
    fair_sharing: bool,
    my_share: int,
    preemptor_priority: int,
) -> list[WorkloadState] | None:
    removed: list[tuple[WorkloadState, ClusterQueueState]] = []
    fitted = False
    priority = preemptor_priority
    for victim in candidates:
        assert victim.cluster_queue is not None
        owner = cq if victim.cluster_queue == cq.name else queue_of(victim.cluster_queue)
        if owner is not cq:
            # Only what another queue borrows can be taken from it.
            if not _borrowing(owner, need):
                continue
            if victim.spec.priority >= priority and not _purely_borrowed(victim, owner, need):
                continue
            if fair_sharing and dominant_share(owner) <= my_share:
                continue
        _shift(victim, owner, -1)
        removed.append((victim, owner))
        if _fits(cq, need, allow_borrowing):
            fitted = True
            break
    if not fitted:
        for victim, owner in removed:
            _shift(victim, owner, +1)
        return None
    # Put back every victim whose removal turned out unnecessary, newest choice first.
    for victim, owner in reversed(removed[:-1]):
        _shift(victim, owner, +1)
        if _fits(cq, need, allow_borrowing):
            removed.remove((victim, owner))
        else:
            _shift(victim, owner, -1)
    for victim, owner in removed:
        _shift(victim, owner, +1)
    return [victim for victim, _ in removed]
