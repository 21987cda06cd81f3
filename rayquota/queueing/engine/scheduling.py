"""Judging one workload in a cycle: admit it, preempt for it, or tell it why it waits.

:class:`Scheduler` holds what one judgement needs beyond the engine's memory
(:class:`~.events.EngineEvents`): the cohort trees being reclaimed, the quota held for
the rest of the cycle, and the verdict of the last failed judgement. The cycle that walks the
queues and calls :meth:`Scheduler._schedule` in order is :class:`~.cycle.Engine`.

A judgement goes in steps, each one able to end it:

1. refusals that do not depend on quota (namespace, stopped LocalQueue, victims still leaving,
   a look-alike's verdict of this cycle);
2. the flavor assignment (:mod:`..flavors.assignment`), against the predecessor's credit for a slice;
3. borrowing rules of the cycle (nobody borrows where preemptors wait; borrowers wait for the
   queues within nominal quota);
4. admission where it fits (with its placement in topology domains), else preemption.
"""

from __future__ import annotations

from enum import Enum

from ..decisions import Admit, Decision, PodSetAssignment, Preempt, PreemptionReason
from ..flavors.assignment import FitMode, FlavorAssignment, assign_flavors
from ..flavors.partial_admission import allows_partial, largest_fitting
from ..model import FlavorResource, PodSet
from ..policies import AdmissionMode, QueueingStrategy, StopPolicy, WithinClusterQueuePolicy
from ..preemption.victim_oracle import EarlierAdmissions, VictimOracle
from ..queue_order import RequeuingTimestamp
from ..quota.admission_fair_sharing import AdmissionFairSharing, UsageLedger
from ..quota.cohorts import QuotaNode, borrowing_level
from ..quota.fairsharing import FairSharing
from ..quota.state import NOTHING_AWAITED, ClusterQueueState, Phase, Shape, WorkloadState
from ..topology.fit import PlacementAsk
from .cycle_holds import CycleHolds, preemptor_hold, unreclaimable_reserve
from .cycle_line import STATIC_VERDICT, Verdict, VerdictBasis
from .events import EngineEvents
from .routing import local_queue_key

_VictimsKey = tuple[str, Shape, int, float]
"""The no-victims cache key: (ClusterQueue, shape, priority, creation time when it matters)."""


class Outcome(Enum):
    ADMITTED = 1
    BLOCKED = 2
    """Did not fit (or waits for its victims): blocks a StrictFIFO queue."""
    SKIPPED = 3
    """Not admissible for a reason unrelated to quota (stopped queue, namespace): never blocks."""
    PREEMPTING = 4
    """Waits for its victims: holds back the rest of its queue, which would take the freed quota."""
    WOULD_BORROW = 5
    """Fits only by borrowing: judged again (with its queue's line) once the queues of its
    cohort tree have admitted what fits in their own quota at its priority or above."""


class Scheduler(EngineEvents):
    """Decides for one workload at a time; see the module's steps."""

    def __init__(
        self,
        *,
        fair_sharing: bool | FairSharing = False,
        admission_fair_sharing: AdmissionFairSharing | None = None,
        requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION,
    ) -> None:
        super().__init__(requeuing_timestamp)
        self.fair_sharing = fair_sharing
        self.admission_usage: UsageLedger | None = (
            None if admission_fair_sharing is None else UsageLedger(admission_fair_sharing)
        )
        """The LocalQueues' consumed usage, with admission fair sharing configured."""
        self._reclaiming: set[QuotaNode] = set()
        """Cohort trees where preemptors wait for their victims: nobody borrows there."""
        self._verdict: Verdict | None = None
        """How the last failed ``_schedule`` was decided (see :mod:`.cycle_line`)."""
        self._borrowing_levels: dict[str, int] = {}
        """Per ClusterQueue, how far up the cohort tree its line's borrower of this cycle must go."""
        self._holds = CycleHolds(self._accounting)
        self._no_candidates: dict[str, tuple[dict[FlavorResource, int], str]] = {}
        """Workloads the first pass found no victim for, deferred to the borrowers' pass."""
        self._earlier_admissions = EarlierAdmissions()
        """Per cohort tree, whether a victim search there could find anything this cycle."""

    def _schedule(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], *, may_borrow: bool = True
    ) -> Outcome:
        early = self._refusal_before_fit(wl, cq, out)
        if early is not None:
            return early
        spec = wl.spec
        newer_matters = (
            cq.spec.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        )
        victims_key = (cq.name, wl.shape, spec.priority, wl.queued_at if newer_matters else 0.0)
        if not spec.replaces:
            cached = self._cached_refusal(cq, wl, victims_key, newer_matters)
            if cached is not None:
                return self._not_admitted(wl, cq, out, cached)

        # The slice replaces a running predecessor: it is admitted against the
        # predecessor's quota (credit) when both belong to the same queue.
        predecessor = self._workloads.get(spec.replaces) if spec.replaces else None
        if predecessor is not None and predecessor.phase is not Phase.ADMITTED:
            predecessor = None
        same_queue = predecessor is not None and predecessor.cluster_queue == cq.name
        credit = predecessor.usage if predecessor is not None and same_queue else {}
        preferred = {ps.name: ps.flavors for ps in predecessor.pod_sets} if predecessor and same_queue else {}
        members = self._accounting.members_of(cq)
        candidates_exist = self._earlier_admissions.in_tree(cq.node.root(), members, self._cycle)
        oracle = VictimOracle(
            wl,
            cq,
            members,
            self._accounting.queues.__getitem__,
            self._cycle,
            self.fair_sharing,
            candidates_exist,
        )
        assignment = assign_flavors(
            cq,
            spec.pod_sets,
            self._accounting.flavors,
            credit,
            preferred,
            self._topology.placement.refusal,
            oracle,
        )
        pod_sets = spec.pod_sets
        if not spec.replaces and allows_partial(pod_sets) and not _can_be_had(assignment, oracle):
            partial = self._partial_assignment(cq, pod_sets, oracle)
            if partial is not None:
                pod_sets, assignment = partial
        refused = self._borrowing_refusal(wl, cq, out, assignment, victims_key, may_borrow=may_borrow)
        if refused is not None:
            return refused
        if assignment.mode < FitMode.PREEMPT:
            if not spec.replaces:
                self._no_fit[(cq.name, wl.shape)] = "; ".join(assignment.reasons) or "does not fit"
                self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
            return self._not_admitted(wl, cq, out, "; ".join(assignment.reasons) or "does not fit")

        kept = {}
        if predecessor is not None and same_queue:
            kept = {ps.name: ps.topology for ps in predecessor.pod_sets if ps.topology is not None}
        asks = self._topology.placement.asks(pod_sets, assignment.pod_sets, kept)
        if assignment.mode >= FitMode.BORROW and self._topology.admission_hold is not None:
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
            return self._not_admitted(wl, cq, out, self._topology.admission_hold)
        if assignment.mode >= FitMode.BORROW:
            return self._admit_placed(wl, cq, out, assignment, asks, predecessor)
        return self._preempt_for_quota(wl, cq, out, assignment, oracle, asks, (victims_key, newer_matters))

    def _partial_assignment(
        self, cq: ClusterQueueState, pod_sets: tuple[PodSet, ...], oracle: VictimOracle
    ) -> tuple[tuple[PodSet, ...], FlavorAssignment] | None:
        """Kueue's partial admission: the largest counts down to the pod sets' ``minCount`` that
        fit, or that preemption can make room for (see :mod:`..flavors.partial_admission`)."""

        def fits(counts: tuple[PodSet, ...]) -> tuple[tuple[PodSet, ...], FlavorAssignment] | None:
            assignment = assign_flavors(
                cq, counts, self._accounting.flavors, {}, {}, self._topology.placement.refusal, oracle
            )
            return (counts, assignment) if _can_be_had(assignment, oracle) else None

        return largest_fitting(pod_sets, fits)

    def _refusal_before_fit(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision]
    ) -> Outcome | None:
        """Steps that need no flavor assignment: the namespace, a stopped LocalQueue, victims
        still leaving, or a verdict of this cycle's first pass."""
        spec = wl.spec
        selector = cq.spec.namespace_selector
        if selector is not None and not selector.matches(self._namespaces.get(spec.namespace, {})):
            self._pend(out, wl, selector.refusal(spec.namespace, cq.name))
            cq.park(wl)
            self._verdict = STATIC_VERDICT
            return Outcome.SKIPPED
        local_queue = self._router.local_queues.get(local_queue_key(spec))
        if local_queue is not None and local_queue.stop_policy is not StopPolicy.NONE:
            self._pend(out, wl, f"LocalQueue {local_queue.key} is stopped")
            cq.park(wl)
            self._verdict = STATIC_VERDICT
            return Outcome.SKIPPED
        if wl.awaiting:
            still = self._awaited(wl)
            if still:
                self._pend(out, wl, f"waiting for {still} preempted workload(s) to release quota")
                return Outcome.PREEMPTING
            wl.awaiting = NOTHING_AWAITED
        deferred = self._no_candidates.pop(wl.key, None)
        if deferred is not None:
            # Judged in this cycle's first pass: nothing since can have given it a victim or room.
            need, reason = deferred
            outcome = self._not_admitted(wl, cq, out, reason)
            self._holds.hold(cq, unreclaimable_reserve(cq, need), unreclaimable=True)
            return outcome
        return None

    def _cached_refusal(
        self, cq: ClusterQueueState, wl: WorkloadState, victims_key: _VictimsKey, newer_matters: bool
    ) -> str | None:
        """This cycle's verdict on a look-alike (no fit, or no victims), if there is one."""
        cached = self._no_fit.get((cq.name, wl.shape))
        if cached is None:
            cached = self._no_victims.get(victims_key)
            if cached is not None and not newer_matters:
                self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        else:
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        return cached

    def _borrowing_refusal(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        out: list[Decision],
        assignment: FlavorAssignment,
        victims_key: _VictimsKey,
        *,
        may_borrow: bool,
    ) -> Outcome | None:
        """The cycle's rules for a workload that would borrow."""
        if assignment.mode is FitMode.BORROW and cq.node.root() in self._reclaiming:
            # Like Kueue: while quota in a cohort is being reclaimed by preemption, nobody
            # borrows there, or the freed quota would be taken before the preemptor gets it.
            root = cq.node.root()
            self._verdict = Verdict(VerdictBasis.USAGE, self._accounting.usage_epoch(root), root)
            return self._not_admitted(
                wl, cq, out, f"would borrow while cohort {cq.node.root().name} has preemptions in progress"
            )
        if assignment.mode is FitMode.BORROW and not may_borrow:
            self._borrowing_levels[cq.name] = borrowing_level_of(cq, assignment.need)
            return Outcome.WOULD_BORROW
        if assignment.no_candidates and not may_borrow and cq.node.parent is not None:
            # It could have the quota only from the cohort and may preempt nobody for it: Kueue
            # counts it as borrowing and orders it after the workloads within nominal quota.
            reason = "; ".join(assignment.reasons) or "does not fit"
            self._no_candidates[wl.key] = (assignment.need, reason)
            if not wl.spec.replaces:
                self._no_victims[victims_key] = reason  # its look-alikes find none either
            return Outcome.WOULD_BORROW
        return None

    def _admit_placed(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        out: list[Decision],
        assignment: FlavorAssignment,
        asks: list[PlacementAsk],
        predecessor: WorkloadState | None,
    ) -> Outcome:
        """The quota is there: admit it where its topology request has room, or free a domain."""
        placement = self._topology.placement.place(asks) if asks else None
        if placement is None or placement.failure is None:
            chosen = assignment.pod_sets
            if placement is not None:
                chosen = self._topology.placement.with_placement(chosen, placement)
            self._admit(wl, cq, assignment.usage, tuple(chosen), predecessor)
            # A scale-up slice of an admitted workload is not checked again: its pods run.
            rules = cq.spec.admission_checks if predecessor is None else ()
            checks = self._checks.start(wl, rules, wl.pod_sets)
            out.append(
                Admit(
                    wl.key,
                    cq.name,
                    wl.pod_sets,
                    dict(wl.usage),
                    assignment.borrowing,
                    predecessor.key if predecessor is not None else None,
                    checks,
                )
            )
            return Outcome.ADMITTED
        # The quota is there, the room in one domain is not: free a domain, or wait for one.
        members = self._accounting.members_of(cq)
        topology_victims = self._topology.placement.victims(wl, cq, asks, (), members, self._cycle)
        if topology_victims is not None:
            return self._preempt(wl, cq, out, topology_victims, {})
        return self._no_room(wl, cq, out, placement.failure or "no room")

    def _preempt_for_quota(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        out: list[Decision],
        assignment: FlavorAssignment,
        oracle: VictimOracle,
        asks: list[PlacementAsk],
        cache: tuple[_VictimsKey, bool],
    ) -> Outcome:
        """It fits only if others leave: choose its victims, or hold its need for the cycle."""
        reason = "; ".join(assignment.reasons) or "does not fit"
        victims = oracle.victims(assignment.need)
        if victims is not None and self._holds.overlaps(victims.workloads):
            # Kueue skips a preemption whose targets another one of the cycle took; its
            # look-alikes would find the same targets while the tree's usage stays put.
            root = cq.node.root()
            self._verdict = Verdict(VerdictBasis.USAGE, self._accounting.usage_epoch(root), root)
            reason = "its preemption targets are already being preempted for another workload"
            return self._not_admitted(wl, cq, out, reason)
        if victims is not None:
            chosen_victims = victims.workloads
            if asks:
                placement = self._topology.placement.place(asks, [v.key for v in chosen_victims])
                if placement.failure is not None:
                    members = self._accounting.members_of(cq)
                    more = self._topology.placement.victims(
                        wl, cq, asks, chosen_victims, members, self._cycle
                    )
                    if more is None:
                        return self._no_room(wl, cq, out, placement.failure)
                    chosen_victims = more
            self._holds.hold(cq, preemptor_hold(cq, assignment.need, chosen_victims), unreclaimable=False)
            self._holds.target(chosen_victims)
            return self._preempt(wl, cq, out, chosen_victims, victims.kinds)
        if not wl.spec.replaces:
            victims_key, newer_matters = cache
            self._no_victims[victims_key] = reason
            if not newer_matters:
                self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        outcome = self._not_admitted(wl, cq, out, reason)
        # Held after it was parked: the hold keeps others from its quota, not itself in line.
        self._holds.hold(cq, unreclaimable_reserve(cq, assignment.need), unreclaimable=True)
        return outcome

    def _preempt(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        out: list[Decision],
        victims: list[WorkloadState],
        kinds: dict[str, PreemptionReason],
    ) -> Outcome:
        """Evict ``victims`` for ``wl``, which waits for them to release their quota and room.
        Victims chosen for room in a domain (no quota kind known) are named by their queue."""
        keys = tuple(v.key for v in victims)
        # Victims already being evicted free their quota anyway: only the rest are new.
        fresh = tuple(v for v in victims if v.phase is Phase.ADMITTED)
        for victim in fresh:
            victim.phase = Phase.EVICTING
        wl.awaiting = set(keys)
        self._preemptors[wl.key] = wl
        self._reclaiming.add(cq.node.root())
        if fresh:
            fresh_kinds = {
                v.key: kinds.get(
                    v.key,
                    PreemptionReason.IN_CLUSTER_QUEUE
                    if v.cluster_queue == cq.name
                    else PreemptionReason.RECLAIM_WITHIN_COHORT,
                )
                for v in fresh
            }
            distinct = set(fresh_kinds.values())
            kind = distinct.pop() if len(distinct) == 1 else PreemptionReason.RECLAIM_WITHIN_COHORT
            why = f"preempted to admit {wl.key} (priority {wl.spec.priority}) in ClusterQueue {cq.name}"
            out.append(Preempt(tuple(v.key for v in fresh), why, wl.key, kind, fresh_kinds))
        self._pend(out, wl, f"waiting for {len(keys)} preempted workload(s) to release quota")
        return Outcome.PREEMPTING

    def _no_room(self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], reason: str) -> Outcome:
        """Fits the quota, not the topology: parked until room in a domain is freed."""
        self._topology.waiting.add(cq.name)
        if not wl.spec.replaces:
            self._no_fit[(cq.name, wl.shape)] = reason
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        return self._not_admitted(wl, cq, out, reason)

    def _not_admitted(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], reason: str
    ) -> Outcome:
        self._pend(out, wl, reason)
        if cq.node.root() in self._holds.roots:
            # Quota held for this cycle only may be what it lacks: judged again next cycle.
            self._verdict = None
        elif cq.spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO:
            cq.park(wl)
        return Outcome.BLOCKED

    def _awaited(self, wl: WorkloadState) -> int:
        """How many of the workload's victims still hold quota."""
        workloads = self._workloads
        return sum(1 for k in wl.awaiting if k in workloads and workloads[k].phase is Phase.EVICTING)

    def _admit(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        usage: dict[FlavorResource, int],
        pod_sets: tuple[PodSetAssignment, ...],
        predecessor: WorkloadState | None,
    ) -> None:
        cq.active.pop(wl.key, None)
        self._accounting.charge(wl, cq.name, usage, pod_sets, cycle=self._cycle, now=self._now)
        self._topology.placement.charge(wl)
        if self.admission_usage is not None and cq.spec.admission_mode is USAGE_BASED:
            self.admission_usage.admitted(local_queue_key(wl.spec), per_resource(usage), self._now)
        self._accounting.wake_possible_preemptors(wl, cq)
        if predecessor is not None:
            # The slice takes over: the predecessor's pods now count as the slice's.
            self._forget(predecessor)


def _can_be_had(assignment: FlavorAssignment, oracle: VictimOracle) -> bool:
    """It fits (borrowing or not), or preemption finds victims for it (Kueue's test of a whole
    assignment before it tries partial admission)."""
    if assignment.mode >= FitMode.BORROW:
        return True
    return assignment.mode is FitMode.PREEMPT and oracle.victims(assignment.need) is not None


USAGE_BASED = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING


def per_resource(usage: dict[FlavorResource, int]) -> dict[str, int]:
    """Amounts summed over flavors, per resource."""
    out: dict[str, int] = {}
    for (_, resource), amount in usage.items():
        out[resource] = out.get(resource, 0) + amount
    return out


def borrowing_level_of(cq: ClusterQueueState, need: dict[FlavorResource, int]) -> int:
    return max((borrowing_level(cq.node, fr, amount) for fr, amount in need.items()), default=0)
