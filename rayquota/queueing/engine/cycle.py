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
from collections.abc import Callable, Mapping

from ..decisions import Decision
from ..flavors.assignment import FitMode, assign_flavors
from ..policies import QueueingStrategy, StopPolicy
from ..quota.admission_fair_sharing import LocalQueueUsage
from ..quota.cohorts import QuotaNode
from ..quota.fairsharing import ShareMeter, dominant_share
from ..quota.state import ClusterQueueState, Order, PendingGroup, Phase, WorkloadState
from .cycle_line import CycleLine, Verdict, VerdictBasis
from .routing import local_queue_key
from .scheduling import USAGE_BASED, Outcome, Scheduler, borrowing_level_of, per_resource

STRICT = QueueingStrategy.STRICT_FIFO

_LineKey = tuple[int, int, Order, int, CycleLine]
"""A line in a cycle's heap: (fair share, borrowing level, its first workload's order, index, line)."""


class Engine(Scheduler):
    """Holds quotas, queues and workloads in memory (:class:`EngineEvents`) and decides admissions
    (one workload at a time in :class:`Scheduler`, in the order this cycle sets).

    Nothing here blocks or performs I/O. Event methods return ``None``; the
    decisions they cause (evictions of a drained queue, say) come out of the
    next :meth:`run_cycle` together with that cycle's admissions.
    """

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
                if outcome is Outcome.PREEMPTING:
                    reason = f"waiting behind {wl.key}, which is preempting in ClusterQueue {cq.name}"
                    held[cq.name] = (wl.order, reason)
                elif outcome is Outcome.BLOCKED and cq.spec.queueing_strategy is STRICT:
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
            self._push_line(heap, index, CycleLine(cq, done, self._usage_order(cq)))
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
            if outcome is Outcome.WOULD_BORROW:
                borrowers[root] = max(borrowers.get(root, wl.spec.priority), wl.spec.priority)
                deepest[root] = max(deepest.get(root, 0), self._borrowing_levels.get(cq.name, 0))
                line.push_back(wl)
                if group is not None and group.members:
                    line.push_group(group, None)
                self._push_line(stopped, index, line)
                continue
            if group is not None and group.members:
                failed = outcome is Outcome.BLOCKED or outcome is Outcome.SKIPPED
                line.push_group(group, self._verdict if failed else None)
            if outcome is Outcome.PREEMPTING or (
                outcome is Outcome.BLOCKED and cq.spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
            ):
                if outcome is Outcome.PREEMPTING:
                    reason = f"waiting behind {wl.key}, which is preempting in ClusterQueue {cq.name}"
                else:
                    reason = f"waiting behind {wl.key} at the head of StrictFIFO ClusterQueue {cq.name}"
                for behind, behind_group in line.drain():
                    self._hold_one(out, behind, behind_group, reason)
                continue
            self._push_line(heap, index, line)
        return stopped

    # ------------------------------------------------------------ admission fair sharing

    def _usage_order(self, cq: ClusterQueueState) -> Callable[[WorkloadState], float] | None:
        """How the line of a ClusterQueue with usage-based admission fair sharing is ordered."""
        ledger = self.admission_usage
        if ledger is None or cq.spec.admission_mode is not USAGE_BASED:
            return None
        local_queues = self._router.local_queues

        def usage_of(wl: WorkloadState) -> float:
            key = local_queue_key(wl.spec)
            found = local_queues.get(key)
            return ledger.usage(key, 1.0 if found is None else found.fair_sharing_weight)

        return usage_of

    def sample_admission_usage(self, now: float) -> dict[str, LocalQueueUsage]:
        """Every ``usageSamplingInterval``: decay each LocalQueue's consumed usage (of the
        ClusterQueues with usage-based admission fair sharing) towards what its admitted workloads
        use now; return the records to write into their status (empty when not configured)."""
        ledger = self.admission_usage
        if ledger is None:
            return {}
        in_use: dict[str, dict[str, int]] = {}
        for wl in self._workloads.values():
            if wl.phase is not Phase.PENDING:
                totals = in_use.setdefault(local_queue_key(wl.spec), {})
                for resource, amount in per_resource(wl.usage).items():
                    totals[resource] = totals.get(resource, 0) + amount
        out: dict[str, LocalQueueUsage] = {}
        for key, local_queue in self._router.local_queues.items():
            cq = self._accounting.queues.get(local_queue.cluster_queue)
            if cq is not None and cq.spec.admission_mode is USAGE_BASED:
                out[key] = ledger.sample(key, in_use.get(key, {}), now)
        return out

    def restore_local_queue_usage(
        self, local_queue: str, consumed: Mapping[str, int], last_update: float
    ) -> None:
        """A LocalQueue's ``admissionFairSharingStatus`` as written before (the operator's start)."""
        if self.admission_usage is not None:
            self.admission_usage.restore(local_queue, consumed, last_update)

    def weighted_shares(self) -> dict[tuple[bool, str], float]:
        """Kueue's ``status.fairSharing.weightedShare`` before rounding, per (is a ClusterQueue,
        name) of every node in a cohort tree: usage above its subtree's quota per mille of what
        its parent could lend it, the largest over resources, over its weight (infinite when a
        node of weight 0 borrows); 0 for a node without a parent."""
        meter = ShareMeter()
        tree = self._accounting.tree
        out: dict[tuple[bool, str], float] = {}
        for node in (*tree.cluster_queues.values(), *tree.cohorts.values()):
            out[(node.is_cluster_queue, node.name)] = meter.share(node).weighted()
        return out

    def running_queues(self, local_queue: str) -> frozenset[str]:
        """Which of the LocalQueue ``local_queue`` (``namespace/name``) and its ClusterQueue
        exist and are not stopped: ``"LocalQueue"``, ``"ClusterQueue"``."""
        found = self._router.local_queues.get(local_queue)
        if found is None:
            return frozenset()
        cq = self._accounting.queues.get(found.cluster_queue)
        running = {"LocalQueue"} if found.stop_policy is StopPolicy.NONE else set()
        if cq is not None and not cq.stopped:
            running.add("ClusterQueue")
        return frozenset(running)

    def local_queue_usage(self, local_queue: str) -> LocalQueueUsage | None:
        return None if self.admission_usage is None else self.admission_usage.get(local_queue)

    def _held_level(self, wl: WorkloadState, cq: ClusterQueueState, deepest: int) -> int:
        """The borrowing level of a workload held behind higher-priority borrowers of its tree:
        its own if it must borrow too (a scale-up slice measured without its predecessor's
        credit), else the deepest of theirs, so it waits for them."""
        assignment = assign_flavors(
            cq, wl.spec.pod_sets, self._accounting.flavors, {}, {}, self._topology.placement.refusal
        )
        return borrowing_level_of(cq, assignment.need) if assignment.mode is FitMode.BORROW else deepest

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


def _order(wl: WorkloadState) -> Order:
    return wl.order
