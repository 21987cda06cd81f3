"""Fair-sharing preemption, as Kueue v0.19 decides it.

With fair sharing on, a preemptor takes workloads from the queues whose share of the cohort is
largest, so shares converge instead of priorities deciding alone:

- The preemptor's workload is counted in its queue first, so every share below is "with it".
- **Which queue next** (a tournament over the cohort tree): from the root, the child with the
  largest dominant resource share wins (a cohort wins a tie against a queue and is entered);
  queues not borrowing (except the preemptor's own) and queues out of candidates drop out, and
  so do cohorts not borrowing that are not on the preemptor's path.
- **Whether a workload of that queue may go**: the preemptor's own queue gives up its candidates
  by priority (``InClusterQueue``). While the preemptor's queue stays within its nominal quota in
  the resources that need preemption, a borrower's candidate is taken unconditionally: that is
  reclamation (``InCohortReclamation``). Otherwise the shares of the two branches just below their
  lowest common cohort are compared with the first strategy (``InCohortFairSharing``):
  ``LessThanOrEqualToFinalShare`` (the target's share without the workload stays at or above the
  preemptor's) or ``LessThanInitialShare`` (the target's share now is above the preemptor's). A
  queue that gave one workload is measured again before the next.
- If that is not enough and a second strategy is configured (only ``LessThanInitialShare`` can be
  second), the candidates refused are tried again, one per queue, with it.
- Once the workload fits, each victim but the last, newest choice first, is put back if the
  workload still fits without its removal.

Removals are simulated on the live usage and always undone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..decisions import PreemptionReason
from ..model import FlavorResource
from ..quota.cohorts import QuotaNode, add_usage
from ..quota.fairsharing import (
    NEGATIVE_SHARE,
    FairSharing,
    PreemptionStrategy,
    Share,
    ShareMeter,
    compare_shares,
)
from ..quota.state import ClusterQueueState, Phase, WorkloadState


@dataclass(slots=True)
class FairCandidate:
    workload: WorkloadState
    owner: ClusterQueueState
    reason: PreemptionReason = PreemptionReason.FAIR_SHARING


def _move(usage: Mapping[FlavorResource, int], node: QuotaNode, sign: int) -> None:
    for fr, amount in usage.items():
        add_usage(node, fr, sign * amount)


class _Ordering:
    """Kueue's target-queue tournament over the candidates, by owner."""

    def __init__(self, cq: ClusterQueueState, candidates: Sequence[FairCandidate], meter: ShareMeter) -> None:
        self.cq = cq
        self.meter = meter
        self.on_path = set(map(id, cq.node.ancestors()))
        self.by_queue: dict[str, list[FairCandidate]] = {}
        self.owners: dict[str, ClusterQueueState] = {}
        for candidate in candidates:
            self.by_queue.setdefault(candidate.owner.name, []).append(candidate)
            self.owners[candidate.owner.name] = candidate.owner
        self.pruned_queues: set[str] = set()
        self.pruned_cohorts: set[int] = set()

    def has_workload(self, name: str) -> bool:
        return bool(self.by_queue.get(name))

    def pop(self, name: str) -> FairCandidate:
        return self.by_queue[name].pop(0)

    def drop(self, name: str) -> None:
        self.pruned_queues.add(name)

    def __iter__(self) -> Iterator[str]:
        """The next target queue's name, again and again, until none is left."""
        node = self.cq.node
        if node.parent is None:
            while self.cq.name not in self.pruned_queues and self.has_workload(self.cq.name):
                yield self.cq.name
            return
        root = node.root()
        while id(root) not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> str | None:
        best_queue: QuotaNode | None = None
        best_queue_share = NEGATIVE_SHARE
        best_cohort: QuotaNode | None = None
        best_cohort_share = NEGATIVE_SHARE
        for child in cohort.children:
            if child.is_cluster_queue:
                if child.name in self.pruned_queues:
                    continue
                share = self.meter.share(child)
                if (not share.borrowing and child is not self.cq.node) or not self.has_workload(child.name):
                    self.pruned_queues.add(child.name)
                    continue
                order = compare_shares(share, best_queue_share)
                tie_won = order == 0 and best_queue is not None and self._goes_first(child, best_queue)
                if order > 0 or tie_won:
                    best_queue, best_queue_share = child, share
            elif id(child) not in self.pruned_cohorts:
                share = self.meter.share(child)
                if not share.borrowing and id(child) not in self.on_path:
                    self.pruned_cohorts.add(id(child))
                elif compare_shares(share, best_cohort_share) >= 0:
                    best_cohort, best_cohort_share = child, share
        if best_cohort is None and best_queue is None:
            self.pruned_cohorts.add(id(cohort))
            return None
        if best_cohort is not None and compare_shares(best_cohort_share, best_queue_share) >= 0:
            return self._next(best_cohort)
        assert best_queue is not None
        return best_queue.name

    def _goes_first(self, a: QuotaNode, b: QuotaNode) -> bool:
        """Between queues of equal share: the one whose first candidate goes first."""
        first_a, first_b = self.by_queue[a.name][0], self.by_queue[b.name][0]
        return candidate_order(first_a, self.cq) < candidate_order(first_b, self.cq)


def candidate_order(candidate: FairCandidate, cq: ClusterQueueState) -> tuple[bool, bool, int, int, str]:
    """Kueue's order of candidates: being evicted first, other queues before the preemptor's
    own, lower priority, most recently admitted (then the name, for a stable order)."""
    victim = candidate.workload
    return (
        victim.phase is not Phase.EVICTING,
        candidate.owner is cq,
        victim.spec.priority,
        -victim.admitted_seq,
        victim.key,
    )


@dataclass(slots=True)
class _FairSearch:
    cq: ClusterQueueState
    need: Mapping[FlavorResource, int]
    short: tuple[FlavorResource, ...]
    fits_now: Callable[[], bool]
    """Does the preemptor fit (borrowing allowed) with the usage as it is now?"""
    meter: ShareMeter
    taken: list[FairCandidate]

    def fits(self) -> bool:
        """With the preemptor's own usage, counted for the shares, taken out for the check."""
        _move(self.need, self.cq.node, -1)
        try:
            return self.fits_now()
        finally:
            _move(self.need, self.cq.node, +1)

    def take(self, candidate: FairCandidate, reason: PreemptionReason) -> bool:
        candidate.reason = reason
        _move(candidate.workload.usage, candidate.owner.node, -1)
        self.taken.append(candidate)
        return self.fits()

    def within_nominal(self) -> bool:
        """Kueue's ``queueWithinNominalInResourcesNeedingPreemption`` (the workload counted)."""
        node = self.cq.node
        for fr in self.short:
            quota = node.quota.get(fr)
            if node.usage.get(fr, 0) > (quota.nominal if quota else 0):
                return False
        return True

    def shares(self, target: ClusterQueueState) -> tuple[Share, QuotaNode]:
        """The preemptor's share and the target's branch, just below their lowest common cohort."""
        on_path = {id(a): a for a in self.cq.node.ancestors()}
        branch = target.node
        while branch.parent is not None and id(branch.parent) not in on_path:
            branch = branch.parent
        lca = branch.parent
        mine = self.cq.node
        while mine.parent is not None and mine.parent is not lca:
            mine = mine.parent
        return self.meter.share(mine), branch

    def share_without(self, candidate: FairCandidate, branch: QuotaNode) -> Share:
        _move(candidate.workload.usage, candidate.owner.node, -1)
        try:
            return self.meter.share(branch)
        finally:
            _move(candidate.workload.usage, candidate.owner.node, +1)


def _passes(strategy: PreemptionStrategy, mine: Share, before: Share, after: Share) -> bool:
    if strategy is PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare_shares(mine, after) <= 0
    return compare_shares(mine, before) < 0


def _unsatisfiable(mine: Share, before: Share) -> bool:
    """A preemptor of infinite share can pass neither strategy against a finite target."""
    return mine.zero_weight_borrows and not before.zero_weight_borrows


def _first_strategy(
    search: _FairSearch, candidates: Sequence[FairCandidate], strategy: PreemptionStrategy
) -> tuple[bool, list[FairCandidate]]:
    """Returns whether the workload fits, and the candidates the strategy refused."""
    ordering = _Ordering(search.cq, candidates, search.meter)
    retry: list[FairCandidate] = []
    reclaiming = search.within_nominal()
    for name in ordering:
        if name == search.cq.name:
            if search.take(ordering.pop(name), PreemptionReason.IN_CLUSTER_QUEUE):
                return True, []
            continue
        if reclaiming:
            if search.take(ordering.pop(name), PreemptionReason.RECLAIM_WITHIN_COHORT):
                return True, []
            continue
        target = ordering.owners[name]
        mine, branch = search.shares(target)
        before = search.meter.share(branch)
        if _unsatisfiable(mine, before):
            while ordering.has_workload(name):
                retry.append(ordering.pop(name))
            continue
        while ordering.has_workload(name):
            candidate = ordering.pop(name)
            if _passes(strategy, mine, before, search.share_without(candidate, branch)):
                if search.take(candidate, PreemptionReason.FAIR_SHARING):
                    return True, []
                break  # the shares changed: measure the queues again
            retry.append(candidate)
    return False, retry


def _second_strategy(search: _FairSearch, retry: Sequence[FairCandidate]) -> bool:
    """The refused candidates again, the first of each queue, with ``LessThanInitialShare``."""
    ordering = _Ordering(search.cq, retry, search.meter)
    for name in ordering:
        mine, branch = search.shares(ordering.owners[name])
        candidate = ordering.pop(name)
        if compare_shares(mine, search.meter.share(branch)) < 0 and search.take(
            candidate, PreemptionReason.FAIR_SHARING
        ):
            return True
        ordering.drop(name)
    return False


def fair_victims(
    cq: ClusterQueueState,
    need: Mapping[FlavorResource, int],
    short: tuple[FlavorResource, ...],
    candidates: Sequence[FairCandidate],
    fits_now: Callable[[], bool],
    settings: FairSharing,
) -> list[FairCandidate] | None:
    """The victims fair sharing takes so that ``need`` fits in ``cq``, each with its reason; or
    ``None``. ``candidates`` are those the queues' policies allow, in any order."""
    if not candidates:
        return None
    ordered = sorted(candidates, key=lambda c: candidate_order(c, cq))
    search = _FairSearch(cq, need, short, fits_now, ShareMeter(), [])
    _move(need, cq.node, +1)
    try:
        strategies = settings.preemption_strategies
        fits, retry = _first_strategy(search, ordered, strategies[0])
        if not fits and len(strategies) > 1:
            fits = _second_strategy(search, retry)
    finally:
        _move(need, cq.node, -1)
    taken = search.taken
    if fits:
        taken = _fill_back(taken, fits_now)
    for candidate in taken:
        _move(candidate.workload.usage, candidate.owner.node, +1)
    return taken if fits else None


def _fill_back(taken: list[FairCandidate], fits_now: Callable[[], bool]) -> list[FairCandidate]:
    """Put back each victim but the last, newest choice first, where the workload still fits."""
    kept = list(taken)
    for candidate in reversed(taken[:-1]):
        _move(candidate.workload.usage, candidate.owner.node, +1)
        if fits_now():
            kept.remove(candidate)
        else:
            _move(candidate.workload.usage, candidate.owner.node, -1)
    return kept
