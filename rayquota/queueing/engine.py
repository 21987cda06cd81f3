"""The admission engine: events in, scheduling cycles out.

One cycle walks every active pending workload once, in priority then FIFO
order across all ClusterQueues (or, with fair sharing, taking next the head
of the queue with the lowest weighted dominant share), and admits each one
that fits. Rules that keep this single pass honest:

- StrictFIFO: the first workload of a queue that does not fit blocks the rest
  of that queue for the cycle. BestEffortFIFO: it is parked, and looked at
  again only when quota in its cohort tree is freed, the configuration
  changes, or an admission creates something it could preempt.
- A workload that preempted waits for its victims; meanwhile the rest of its
  queue is held back and nobody borrows in its cohort tree, so the freed
  quota reaches the preemptor (which goes first once the victims are gone).
- Within a cycle usage only grows, so a shape that did not fit in a queue is
  not evaluated again in that cycle.
- Parked workloads of one queue that admission cannot tell apart (same shape,
  priority, namespace and LocalQueue) form one group: a wake-up makes a cycle
  look at the group's members in line only until one does not fit, and the
  rest stay parked with that verdict without being judged one by one; a new
  look-alike of a parked group joins it unjudged (nothing that could make it
  fit has changed since). So a cycle's work follows what changed, not how
  many workloads wait. A Pending decision goes only to a workload a cycle
  judged, so a parked workload's reason is the one it was last told.
"""

from __future__ import annotations

import heapq
from enum import Enum

from .cohorts import QuotaNode, borrowing_level
from .cycle_holds import CycleHolds, preemptor_hold, unreclaimable_reserve
from .cycle_line import STATIC_VERDICT, CycleLine, Verdict, VerdictBasis
from .decisions import Admit, Decision, PodSetAssignment, Preempt, PreemptionReason
from .engine_events import EngineEvents
from .fairsharing import FairSharing, dominant_share
from .flavors import FitMode, assign_flavors
from .model import FlavorResource
from .policies import QueueingStrategy, StopPolicy, WithinClusterQueuePolicy
from .routing import local_queue_key
from .state import NOTHING_AWAITED, ClusterQueueState, Order, PendingGroup, Phase, WorkloadState
from .victim_oracle import VictimOracle

STRICT = QueueingStrategy.STRICT_FIFO

_LineKey = tuple[int, int, Order, int, CycleLine]
"""A line in a cycle's heap: (fair share, borrowing level, its first workload's order, index, line)."""


class _Outcome(Enum):
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


class Engine(EngineEvents):
    """Holds quotas, queues and workloads in memory (:class:`EngineEvents`) and decides admissions.

    Nothing here blocks or performs I/O. Event methods return ``None``; the
    decisions they cause (evictions of a drained queue, say) come out of the
    next :meth:`run_cycle` together with that cycle's admissions.
    """

    def __init__(self, *, fair_sharing: bool | FairSharing = False) -> None:
        super().__init__()
        self.fair_sharing = fair_sharing
        self._reclaiming: set[QuotaNode] = set()
        """Cohort trees where preemptors wait for their victims: nobody borrows there."""
        self._verdict: Verdict | None = None
        """How the last failed ``_schedule`` was decided (see :mod:`.cycle_line`)."""
        self._borrowing_levels: dict[str, int] = {}
        """Per ClusterQueue, how far up the cohort tree its line's borrower of this cycle must go."""
        self._holds = CycleHolds(self._accounting)
        self._no_candidates: dict[str, tuple[dict[FlavorResource, int], str]] = {}
        """Workloads the first pass found no victim for, deferred to the borrowers' pass."""

    # ------------------------------------------------------------------ cycle

    def run_cycle(self, now: float = 0.0) -> list[Decision]:
        """Admit, in priority then FIFO order, every pending workload that fits, in one pass.

        ``now`` is the caller's clock (seconds); it is only recorded as the admission time.
        """
        self._cycle += 1
        self._now = now
        self._router.route_due(now)
        out = self._outbox
        self._outbox = []
        self._clear_fit_caches()
        # A preemptor whose victims are gone goes first: the quota was freed for it.
        done: set[str] = set()
        held: dict[str, tuple[Order, str]] = {}
        ready = [wl for wl in self._preemptors.values() if not self._awaited(wl)]
        self._reclaiming = set()
        self._borrowing_levels = {}
        for wl in self._preemptors.values():
            cq = self._accounting.queues.get(wl.cluster_queue or "")
            if cq is not None and self._awaited(wl):
                self._reclaiming.add(cq.node.root())
        for wl in sorted(ready, key=_order):
            self._preemptors.pop(wl.key, None)
            cq = self._accounting.queues.get(wl.cluster_queue or "")
            if cq is None or wl.phase is not Phase.PENDING or wl.key not in cq.active:
                continue
            if cq.spec.queueing_strategy is QueueingStrategy.STRICT_FIFO and wl is not cq.first_awake():
                continue  # a newer head came first; StrictFIFO order decides
            if self._queue_block_reason(cq) is None:
                done.add(wl.key)
                outcome = self._schedule(wl, cq, out)
                if cq.name in held:
                    continue
                if outcome is _Outcome.PREEMPTING:
                    reason = f"waiting behind {wl.key}, which is preempting in ClusterQueue {cq.name}"
                    held[cq.name] = (wl.order, reason)
                elif outcome is _Outcome.BLOCKED and cq.spec.queueing_strategy is STRICT:
                    reason = f"waiting behind {wl.key} at the head of StrictFIFO ClusterQueue {cq.name}"
                    held[cq.name] = (wl.order, reason)
        heap: list[_LineKey] = []
        for index, cq in enumerate(self._accounting.queues.values()):
            if not cq.has_awake():
                continue
            blocked = self._queue_block_reason(cq)
            if blocked is not None:
                self._park_blocked_queue(out, cq, blocked)
                continue
            self._push_line(heap, index, CycleLine(cq, done))
        heapq.heapify(heap)
        # Within nominal quota first among equals: a line whose next workload would have to
        # borrow waits until every queue has admitted what fits in its own quota at that
        # priority (Kueue puts a cycle's non-borrowing heads first). Otherwise an older borrower
        # takes the quota a queue is entitled to, and is reclaimed from it by preemption a
        # moment later, again and again under steady arrivals. Priority still comes first:
        # nothing of lower priority goes ahead of a waiting borrower in its cohort tree.
        borrowers = self._drain_lines(heap, held, out, may_borrow=False)
        heapq.heapify(borrowers)
        self._drain_lines(borrowers, held, out, may_borrow=True)
        self._holds.release()
        self._no_candidates.clear()
        return out

    def _drain_lines(
        self,
        heap: list[_LineKey],
        held: dict[str, tuple[Order, str]],
        out: list[Decision],
        *,
        may_borrow: bool,
    ) -> list[_LineKey]:
        """Judge the lines' workloads in order; return the lines stopped at one that would borrow."""
        stopped: list[_LineKey] = []
        # Per cohort tree, the highest priority of a workload waiting to borrow: nothing of lower
        # priority in that tree goes ahead of it, within nominal quota or not.
        borrowers: dict[QuotaNode, int] = {}
        deepest: dict[QuotaNode, int] = {}
        """Per cohort tree, the highest borrowing level among its waiting borrowers."""
        while heap:
            _, _, _, index, line = heapq.heappop(heap)
            cq = line.cq
            wl, group, verdict = line.pop()
            hold = held.get(cq.name)
            if hold is not None and wl.order > hold[0]:
                self._hold_back(out, line, wl, group, hold[1])
                continue
            root = cq.node.root()
            if not may_borrow and wl.spec.priority < borrowers.get(root, wl.spec.priority):
                if group is None:
                    line.push_back(wl)
                else:
                    line.push_group(group, verdict)
                self._borrowing_levels[cq.name] = self._held_level(wl, cq, deepest[root])
                self._push_line(stopped, index, line)
                continue
            if group is not None:
                if verdict is not None and self._verdict_stands(verdict):
                    # Its look-alike just failed and nothing that decided that has changed.
                    cq.park_group(group)
                    self._push_line(heap, index, line)
                    continue
                cq.wake(wl)
            self._verdict = None
            outcome = self._schedule(wl, cq, out, may_borrow=may_borrow)
            if outcome is _Outcome.WOULD_BORROW:
                borrowers[root] = max(borrowers.get(root, wl.spec.priority), wl.spec.priority)
                deepest[root] = max(deepest.get(root, 0), self._borrowing_levels.get(cq.name, 0))
                line.push_back(wl)
                if group is not None and group.members:
                    line.push_group(group, None)
                self._push_line(stopped, index, line)
                continue
            if group is not None and group.members:
                failed = outcome is _Outcome.BLOCKED or outcome is _Outcome.SKIPPED
                line.push_group(group, self._verdict if failed else None)
            if outcome is _Outcome.PREEMPTING or (
                outcome is _Outcome.BLOCKED and cq.spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
            ):
                if outcome is _Outcome.PREEMPTING:
                    reason = f"waiting behind {wl.key}, which is preempting in ClusterQueue {cq.name}"
                else:
                    reason = f"waiting behind {wl.key} at the head of StrictFIFO ClusterQueue {cq.name}"
                for behind, behind_group in line.drain():
                    self._hold_one(out, behind, behind_group, reason)
                continue
            self._push_line(heap, index, line)
        return stopped

    def _held_level(self, wl: WorkloadState, cq: ClusterQueueState, deepest: int) -> int:
        """The borrowing level of a workload held behind higher-priority borrowers of its tree:
        its own if it must borrow too (a scale-up slice measured without its predecessor's
        credit), else the deepest of theirs, so it waits for them."""
        assignment = assign_flavors(
            cq, wl.spec.pod_sets, self._accounting.flavors, {}, {}, self._placement.refusal
        )
        return _borrowing_level(cq, assignment.need) if assignment.mode is FitMode.BORROW else deepest

    def _push_line(self, heap: list[_LineKey], index: int, line: CycleLine) -> None:
        first = line.first_order()
        if first is not None:
            share = dominant_share(line.cq) if self.fair_sharing else 0
            # Borrowers whose request a lower subtree covers go first, before priority (Kueue's
            # order of a cycle's heads); a queue's later workloads keep its first borrower's level.
            level = self._borrowing_levels.get(line.cq.name, 0)
            heapq.heappush(heap, (share, level, first, index, line))

    def _hold_back(
        self, out: list[Decision], line: CycleLine, wl: WorkloadState, group: PendingGroup | None, reason: str
    ) -> None:
        self._hold_one(out, wl, group, reason)
        for behind, behind_group in line.drain():
            self._hold_one(out, behind, behind_group, reason)

    def _hold_one(
        self, out: list[Decision], wl: WorkloadState, group: PendingGroup | None, reason: str
    ) -> None:
        """Behind a blocked head or a preemptor: stays awake for the next cycle."""
        if group is None:
            self._pend(out, wl, reason)
            line_cq = self._accounting.queues.get(wl.cluster_queue or "")
            if line_cq is not None:
                line_cq.hold_with_look_alikes(wl)
        else:
            group.reason = reason

    def _park_blocked_queue(self, out: list[Decision], cq: ClusterQueueState, reason: str) -> None:
        # Rare (a stopped, inactive or deleted queue), so every awake workload is told why.
        for wl in list(cq.awake_workloads()):
            self._pend(out, wl, reason)
        for wl in list(cq.active.values()):
            cq.park(wl)
        for group in list(cq.awake_groups.values()):
            group.reason = reason
            cq.park_group(group)

    def _verdict_stands(self, verdict: Verdict) -> bool:
        if verdict.basis is VerdictBasis.CACHE:
            return verdict.generation == self._cache_generation
        if verdict.basis is VerdictBasis.USAGE:
            assert verdict.root is not None
            return verdict.generation == self._accounting.usage_epoch(verdict.root)
        return True

    def _queue_block_reason(self, cq: ClusterQueueState) -> str | None:
        if cq.name in self._accounting.deleting or cq.name in self._terminating:
            return f"ClusterQueue {cq.name} is being deleted (Terminating): it admits no new workloads"
        if cq.stopped:
            return f"ClusterQueue {cq.name} is stopped ({cq.spec.stop_policy.value})"
        if cq.node.disabled_reason is not None:
            return f"ClusterQueue {cq.name} is inactive: {cq.node.disabled_reason}"
        problem = self.cluster_queue_problem(cq.spec)
        if problem is not None:
            return f"ClusterQueue {cq.name} is inactive ({problem.reason}): {problem.message}"
        return None

    def _schedule(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], *, may_borrow: bool = True
    ) -> _Outcome:
        spec = wl.spec
        selector = cq.spec.namespace_selector
        if selector is not None and not selector.matches(self._namespaces.get(spec.namespace, {})):
            self._pend(out, wl, selector.refusal(spec.namespace, cq.name))
            cq.park(wl)
            self._verdict = STATIC_VERDICT
            return _Outcome.SKIPPED
        local_queue = self._router.local_queues.get(local_queue_key(spec))
        if local_queue is not None and local_queue.stop_policy is not StopPolicy.NONE:
            self._pend(out, wl, f"LocalQueue {local_queue.key} is stopped")
            cq.park(wl)
            self._verdict = STATIC_VERDICT
            return _Outcome.SKIPPED
        if wl.awaiting:
            still = self._awaited(wl)
            if still:
                self._pend(out, wl, f"waiting for {still} preempted workload(s) to release quota")
                return _Outcome.PREEMPTING
            wl.awaiting = NOTHING_AWAITED
        deferred = self._no_candidates.pop(wl.key, None)
        if deferred is not None:
            # Judged in this cycle's first pass: nothing since can have given it a victim or room.
            need, reason = deferred
            outcome = self._not_admitted(wl, cq, out, reason)
            self._holds.hold(cq, unreclaimable_reserve(cq, need), unreclaimable=True)
            return outcome
        newer_matters = (
            cq.spec.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        )
        victims_key = (cq.name, wl.shape, spec.priority, spec.created if newer_matters else 0.0)
        if not spec.replaces:
            cached = self._no_fit.get((cq.name, wl.shape))
            if cached is None:
                cached = self._no_victims.get(victims_key)
                if cached is not None and not newer_matters:
                    self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
            else:
                self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
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
        oracle = VictimOracle(
            wl, cq, members, self._accounting.queues.__getitem__, self._cycle, self.fair_sharing
        )
        assignment = assign_flavors(
            cq, spec.pod_sets, self._accounting.flavors, credit, preferred, self._placement.refusal, oracle
        )

        if assignment.mode is FitMode.BORROW and cq.node.root() in self._reclaiming:
            # Like Kueue: while quota in a cohort is being reclaimed by preemption, nobody
            # borrows there, or the freed quota would be taken before the preemptor gets it.
            root = cq.node.root()
            self._verdict = Verdict(VerdictBasis.USAGE, self._accounting.usage_epoch(root), root)
            return self._not_admitted(
                wl, cq, out, f"would borrow while cohort {cq.node.root().name} has preemptions in progress"
            )
        if assignment.mode is FitMode.BORROW and not may_borrow:
            self._borrowing_levels[cq.name] = _borrowing_level(cq, assignment.need)
            return _Outcome.WOULD_BORROW
        if assignment.no_candidates and not may_borrow and cq.node.parent is not None:
            # It could have the quota only from the cohort and may preempt nobody for it: Kueue
            # counts it as borrowing and orders it after the workloads within nominal quota.
            reason = "; ".join(assignment.reasons) or "does not fit"
            self._no_candidates[wl.key] = (assignment.need, reason)
            if not spec.replaces:
                self._no_victims[victims_key] = reason  # its look-alikes find none either
            return _Outcome.WOULD_BORROW
        if assignment.mode < FitMode.PREEMPT:
            if not spec.replaces:
                self._no_fit[(cq.name, wl.shape)] = "; ".join(assignment.reasons) or "does not fit"
                self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
            return self._not_admitted(wl, cq, out, "; ".join(assignment.reasons) or "does not fit")

        kept = {}
        if predecessor is not None and same_queue:
            kept = {ps.name: ps.topology for ps in predecessor.pod_sets if ps.topology is not None}
        asks = self._placement.asks(spec.pod_sets, assignment.pod_sets, kept)
        if assignment.mode >= FitMode.BORROW and self._admission_hold is not None:
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
            return self._not_admitted(wl, cq, out, self._admission_hold)
        if assignment.mode >= FitMode.BORROW:
            placement = self._placement.place(asks) if asks else None
            if placement is None or placement.failure is None:
                chosen = assignment.pod_sets
                if placement is not None:
                    chosen = self._placement.with_placement(chosen, placement)
                self._admit(wl, cq, assignment.usage, tuple(chosen), predecessor)
                # A scale-up slice of an admitted workload is not checked again: its pods run.
                rules = cq.spec.admission_checks if predecessor is None else ()
                checks = self._start_checks(wl, rules, wl.pod_sets)
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
                return _Outcome.ADMITTED
            # The quota is there, the room in one domain is not: free a domain, or wait for one.
            members = self._accounting.members_of(cq)
            topology_victims = self._placement.victims(wl, cq, asks, (), members, self._cycle)
            if topology_victims is not None:
                return self._preempt(wl, cq, out, topology_victims, {})
            return self._no_room(wl, cq, out, placement.failure or "no room")

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
                placement = self._placement.place(asks, [v.key for v in chosen_victims])
                if placement.failure is not None:
                    members = self._accounting.members_of(cq)
                    more = self._placement.victims(wl, cq, asks, chosen_victims, members, self._cycle)
                    if more is None:
                        return self._no_room(wl, cq, out, placement.failure)
                    chosen_victims = more
            self._holds.hold(cq, preemptor_hold(cq, assignment.need, chosen_victims), unreclaimable=False)
            self._holds.target(chosen_victims)
            return self._preempt(wl, cq, out, chosen_victims, victims.kinds)
        if not spec.replaces:
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
    ) -> _Outcome:
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
        return _Outcome.PREEMPTING

    def _no_room(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], reason: str
    ) -> _Outcome:
        """Fits the quota, not the topology: parked until room in a domain is freed."""
        self._topology_waiting.add(cq.name)
        if not wl.spec.replaces:
            self._no_fit[(cq.name, wl.shape)] = reason
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        return self._not_admitted(wl, cq, out, reason)

    def _not_admitted(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], reason: str
    ) -> _Outcome:
        self._pend(out, wl, reason)
        if cq.node.root() in self._holds.roots:
            # Quota held for this cycle only may be what it lacks: judged again next cycle.
            self._verdict = None
        elif cq.spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO:
            cq.park(wl)
        return _Outcome.BLOCKED

    def _awaited(self, wl: WorkloadState) -> int:
        """How many of the workload's victims still hold quota."""
        workloads = self._workloads
        return sum(1 for k in wl.awaiting if k in workloads and workloads[k].phase is Phase.EVICTING)

    # --------------------------------------------------------------- internals

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
        self._placement.charge(wl)
        self._accounting.wake_possible_preemptors(wl, cq)
        if predecessor is not None:
            # The slice takes over: the predecessor's pods now count as the slice's.
            self._forget(predecessor)


def _order(wl: WorkloadState) -> Order:
    return wl.order


def _borrowing_level(cq: ClusterQueueState, need: dict[FlavorResource, int]) -> int:
    return max((borrowing_level(cq.node, fr, amount) for fr, amount in need.items()), default=0)
