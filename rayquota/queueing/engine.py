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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from .cohorts import QuotaNode, QuotaTree, add_usage, available
from .cycle_line import STATIC_VERDICT, CycleLine, Verdict, VerdictBasis
from .decisions import Admit, Decision, Pending, PodSetAssignment, Preempt, PreemptionReason
from .fairsharing import dominant_share
from .flavors import FitMode, assign_flavors
from .model import ClusterQueue, Cohort, FlavorResource, LocalQueue, ResourceFlavor, Workload
from .policies import (
    BorrowWithinCohortPolicy,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from .preemption import find_victims
from .state import ClusterQueueState, Order, PendingGroup, Phase, Shape, WorkloadState

STRICT = QueueingStrategy.STRICT_FIFO


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


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    key: str
    phase: Phase
    cluster_queue: str | None
    pending_reason: str
    usage: Mapping[FlavorResource, int]
    pod_sets: tuple[PodSetAssignment, ...]
    admitted_at: float | None
    """The ``now`` of the cycle that admitted it (``None`` while pending)."""


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


class Engine:
    """Holds quotas, queues and workloads in memory and decides admissions.

    Nothing here blocks or performs I/O. Event methods return ``None``; the
    decisions they cause (evictions of a drained queue, say) come out of the
    next :meth:`run_cycle` together with that cycle's admissions.
    """

    def __init__(self, *, fair_sharing: bool = False) -> None:
        self.fair_sharing = fair_sharing
        self._flavors: dict[str, ResourceFlavor] = {}
        self._cluster_queue_specs: dict[str, ClusterQueue] = {}
        self._cohort_specs: dict[str, Cohort] = {}
        self._local_queues: dict[str, LocalQueue] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._tree = QuotaTree()
        self._queues: dict[str, ClusterQueueState] = {}
        self._members: dict[QuotaNode, list[ClusterQueueState]] = {}
        self._workloads: dict[str, WorkloadState] = {}
        self._unrouted: dict[str, WorkloadState] = {}
        self._deleting: set[str] = set()
        self._terminating: set[str] = set()
        self._outbox: list[Decision] = []
        # Within one cycle usage only grows, so a shape that did not fit in a
        # queue (or found no victims) will not fit later in the same cycle.
        self._no_fit: dict[tuple[str, Shape], str] = {}
        self._no_victims: dict[tuple[str, Shape, int, float], str] = {}
        # Workloads that preempted and wait for their victims to be released.
        self._preemptors: dict[str, WorkloadState] = {}
        self._reclaiming: set[QuotaNode] = set()
        self._cache_generation = 0
        """Bumped whenever the fit caches are cleared: verdicts taken from them expire then."""
        self._usage_epochs: dict[QuotaNode, int] = {}
        """Per cohort-tree root, bumped on every usage change in the tree."""
        self._verdict: Verdict | None = None
        """How the last failed ``_schedule`` was decided (see :mod:`.cycle_line`)."""
        self._seq = 0
        self._admission_seq = 0
        self._cycle = 0
        self._now = 0.0

    # ----------------------------------------------------------- configuration

    # An upsert that changes nothing is a no-op: the operator re-sends a queue on every status
    # write of its own, and waking every parked workload each time would undo the parking.
    # A draining spec is the exception: it drains what was admitted (or restored) since.

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        if self._flavors.get(flavor.name) == flavor:
            return
        self._flavors[flavor.name] = flavor
        self._unpark_everything()

    def delete_flavor(self, name: str) -> None:
        self._flavors.pop(name, None)
        self._unpark_everything()

    def upsert_cohort(self, cohort: Cohort) -> None:
        if self._cohort_specs.get(cohort.name) == cohort:
            return
        self._cohort_specs[cohort.name] = cohort
        self._rebuild()

    def delete_cohort(self, name: str) -> None:
        self._cohort_specs.pop(name, None)
        self._rebuild()

    def upsert_cluster_queue(self, cluster_queue: ClusterQueue) -> None:
        if (
            self._cluster_queue_specs.get(cluster_queue.name) == cluster_queue
            and cluster_queue.name not in self._deleting
            and cluster_queue.stop_policy is not StopPolicy.HOLD_AND_DRAIN
        ):
            return
        self._deleting.discard(cluster_queue.name)
        self._cluster_queue_specs[cluster_queue.name] = cluster_queue
        self._rebuild()
        if cluster_queue.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            state = self._queues[cluster_queue.name]
            self._drain(list(state.admitted.values()), f"ClusterQueue {cluster_queue.name} is stopped")
        self._reroute_unrouted()

    def terminate_cluster_queue(self, name: str) -> None:
        """The ClusterQueue is being deleted but still exists (a finalizer holds it while it has
        admitted workloads): it admits nothing more, its pending workloads stay queued with that
        reason, and its admitted ones keep their quota until :meth:`delete_cluster_queue`."""
        state = self._queues.get(name)
        if state is not None and name not in self._terminating:
            self._terminating.add(name)
            state.unpark()  # parked workloads learn the new reason in the next cycle

    def delete_cluster_queue(self, name: str) -> None:
        """Stop admitting to ``name``; it disappears once its admitted workloads are released."""
        self._terminating.discard(name)
        state = self._queues.get(name)
        if state is None:
            return
        for wl in state.pending_workloads():
            state.remove_pending(wl)
            self._make_unrouted(wl)
        if state.admitted:
            self._deleting.add(name)
        else:
            self._cluster_queue_specs.pop(name, None)
            self._rebuild()

    def upsert_local_queue(self, local_queue: LocalQueue) -> None:
        old = self._local_queues.get(local_queue.key)
        if old == local_queue and local_queue.stop_policy is not StopPolicy.HOLD_AND_DRAIN:
            return
        self._local_queues[local_queue.key] = local_queue
        if old is not None and old.cluster_queue != local_queue.cluster_queue:
            for wl in self._pending_of_local_queue(local_queue.key):
                self._remove_from_queue(wl)
                self._make_unrouted(wl)
        if local_queue.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            admitted = [
                wl
                for wl in self._workloads.values()
                if wl.phase is Phase.ADMITTED and self._local_queue_key(wl.spec) == local_queue.key
            ]
            self._drain(admitted, f"LocalQueue {local_queue.key} is stopped")
        self._reroute_unrouted()
        self._unpark_everything()

    def delete_local_queue(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        if self._local_queues.pop(key, None) is None:
            return
        for wl in self._pending_of_local_queue(key):
            self._remove_from_queue(wl)
            self._make_unrouted(wl)

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        """Namespace labels, for ClusterQueue namespace selectors."""
        if self._namespaces.get(name) == labels:
            return
        self._namespaces[name] = dict(labels)
        self._unpark_everything()

    # --------------------------------------------------------------- workloads

    def add_workload(self, workload: Workload) -> None:
        """A new workload (or replacement slice, if ``workload.replaces`` is set) wants admission."""
        if workload.key in self._workloads:
            self.update_workload(workload)
            return
        self._seq += 1
        wl = WorkloadState(workload, self._seq)
        self._workloads[wl.key] = wl
        predecessor = self._workloads.get(workload.replaces) if workload.replaces else None
        if predecessor is not None:
            if predecessor.phase is Phase.PENDING:
                # Superseded before it ever ran: the new slice simply takes its place.
                self._forget(predecessor)
            else:
                predecessor.successor = wl.key
        self._route(wl)

    def update_workload(self, workload: Workload) -> None:
        """A workload changed. Admitted workloads may lower demand (applied now), never raise it.

        Raising the demand of an admitted workload is a scale-up: submit a
        replacement slice with ``add_workload(Workload(..., replaces=key))``.
        """
        wl = self._workloads.get(workload.key)
        if wl is None:
            self.add_workload(workload)
            return
        if wl.phase is Phase.PENDING:
            self._remove_from_queue(wl)
            wl.set_spec(workload)
            self._route(wl)
            return
        if workload.pod_sets != wl.spec.pod_sets:
            self._scale_down(wl, workload)
        wl.set_spec(workload)
        if not workload.active and wl.phase is Phase.ADMITTED:
            self._drain([wl], f"workload {wl.key} was deactivated", PreemptionReason.DEACTIVATED)

    def delete_workload(self, key: str) -> None:
        """The workload is gone, and so are its pods: its quota is released."""
        wl = self._workloads.get(key)
        if wl is not None:
            self._forget(wl)

    def finish_workload(self, key: str, *, pods_gone: bool = True) -> None:
        """The workload completed. With ``pods_gone=False`` its quota stays held until :meth:`release`."""
        wl = self._workloads.get(key)
        if wl is None:
            return
        if wl.phase is Phase.PENDING or pods_gone:
            self._forget(wl)
            return
        wl.phase = Phase.EVICTING
        wl.drop_on_release = True

    def evict(self, key: str) -> None:
        """The operator evicts an admitted workload; quota is held until :meth:`release`."""
        wl = self._workloads.get(key)
        if wl is not None and wl.phase is Phase.ADMITTED:
            wl.phase = Phase.EVICTING

    def release(self, key: str) -> None:
        """The pods of an evicted (or finished) workload are gone: free its quota.

        A preempted workload goes back to its queue, keeping its place in FIFO
        order; a finished, deactivated or superseded one is forgotten.
        """
        wl = self._workloads.get(key)
        if wl is None or wl.phase is Phase.PENDING:
            return
        if wl.drop_on_release or wl.successor is not None or wl.phase is Phase.ADMITTED:
            self._forget(wl)
            return
        self._free(wl)
        wl.phase = Phase.PENDING
        self._route(wl)

    def restore_admission(
        self,
        workload: Workload,
        cluster_queue: str,
        pod_sets: Sequence[PodSetAssignment],
        *,
        evicting: bool = False,
    ) -> None:
        """Re-create an admission recorded in the API server (operator start-up).

        The quota is charged as recorded even if it no longer fits: the pods exist.
        """
        self.delete_workload(workload.key)
        self._seq += 1
        wl = WorkloadState(workload, self._seq)
        self._workloads[wl.key] = wl
        usage: dict[FlavorResource, int] = {}
        for ps in pod_sets:
            for resource, amount in ps.usage.items():
                fr = (ps.flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
        self._charge(wl, cluster_queue, usage, tuple(pod_sets))
        if evicting:
            wl.phase = Phase.EVICTING

    # ------------------------------------------------------------------ cycle

    def run_cycle(self, now: float = 0.0) -> list[Decision]:
        """Admit, in priority then FIFO order, every pending workload that fits, in one pass.

        ``now`` is the caller's clock (seconds); it is only recorded as the admission time.
        """
        self._cycle += 1
        self._now = now
        out = self._outbox
        self._outbox = []
        self._clear_fit_caches()
        # A preemptor whose victims are gone goes first: the quota was freed for it.
        done: set[str] = set()
        held: dict[str, tuple[Order, str]] = {}
        ready = [wl for wl in self._preemptors.values() if not self._awaited(wl)]
        self._reclaiming = set()
        for wl in self._preemptors.values():
            cq = self._queues.get(wl.cluster_queue or "")
            if cq is not None and self._awaited(wl):
                self._reclaiming.add(cq.node.root())
        for wl in sorted(ready, key=_order):
            self._preemptors.pop(wl.key, None)
            cq = self._queues.get(wl.cluster_queue or "")
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
        heap: list[tuple[int, Order, int, CycleLine]] = []
        for index, cq in enumerate(self._queues.values()):
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
        return out

    def _drain_lines(
        self,
        heap: list[tuple[int, Order, int, CycleLine]],
        held: dict[str, tuple[Order, str]],
        out: list[Decision],
        *,
        may_borrow: bool,
    ) -> list[tuple[int, Order, int, CycleLine]]:
        """Judge the lines' workloads in order; return the lines stopped at one that would borrow."""
        stopped: list[tuple[int, Order, int, CycleLine]] = []
        # Per cohort tree, the highest priority of a workload waiting to borrow: nothing of lower
        # priority in that tree goes ahead of it, within nominal quota or not.
        borrowers: dict[QuotaNode, int] = {}
        while heap:
            _, _, index, line = heapq.heappop(heap)
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

    def _push_line(self, heap: list[tuple[int, Order, int, CycleLine]], index: int, line: CycleLine) -> None:
        first = line.first_order()
        if first is not None:
            share = dominant_share(line.cq) if self.fair_sharing else 0
            heapq.heappush(heap, (share, first, index, line))

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
            line_cq = self._queues.get(wl.cluster_queue or "")
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
            return verdict.generation == self._usage_epochs.get(verdict.root, 0)
        return True

    def _clear_fit_caches(self) -> None:
        self._no_fit.clear()
        self._no_victims.clear()
        self._cache_generation += 1

    def _usage_changed(self, cq: ClusterQueueState) -> None:
        root = cq.node.root()
        self._usage_epochs[root] = self._usage_epochs.get(root, 0) + 1

    def _queue_block_reason(self, cq: ClusterQueueState) -> str | None:
        if cq.name in self._deleting or cq.name in self._terminating:
            return f"ClusterQueue {cq.name} is being deleted (Terminating): it admits no new workloads"
        if cq.stopped:
            return f"ClusterQueue {cq.name} is stopped ({cq.spec.stop_policy.value})"
        if cq.node.disabled_reason is not None:
            return f"ClusterQueue {cq.name} is inactive: {cq.node.disabled_reason}"
        return None

    def _schedule(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], *, may_borrow: bool = True
    ) -> _Outcome:
        spec = wl.spec
        selector = cq.spec.namespace_selector
        if selector is not None and not selector.matches(self._namespaces.get(spec.namespace, {})):
            self._pend(out, wl, f"namespace {spec.namespace} is not selected by ClusterQueue {cq.name}")
            cq.park(wl)
            self._verdict = STATIC_VERDICT
            return _Outcome.SKIPPED
        local_queue = self._local_queues.get(self._local_queue_key(spec))
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
            wl.awaiting.clear()
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
        assignment = assign_flavors(cq, spec.pod_sets, self._flavors, credit, preferred)

        if assignment.mode is FitMode.BORROW and cq.node.root() in self._reclaiming:
            # Like Kueue: while quota in a cohort is being reclaimed by preemption, nobody
            # borrows there, or the freed quota would be taken before the preemptor gets it.
            root = cq.node.root()
            self._verdict = Verdict(VerdictBasis.USAGE, self._usage_epochs.get(root, 0), root)
            return self._not_admitted(
                wl, cq, out, f"would borrow while cohort {cq.node.root().name} has preemptions in progress"
            )
        if assignment.mode is FitMode.BORROW and not may_borrow:
            return _Outcome.WOULD_BORROW
        if assignment.mode >= FitMode.BORROW:
            self._admit(wl, cq, assignment.usage, tuple(assignment.pod_sets), predecessor)
            out.append(
                Admit(
                    wl.key,
                    cq.name,
                    wl.pod_sets,
                    dict(wl.usage),
                    assignment.borrowing,
                    predecessor.key if predecessor is not None else None,
                )
            )
            return _Outcome.ADMITTED

        reason = "; ".join(assignment.reasons) or "does not fit"
        if assignment.mode is FitMode.PREEMPT:
            victims = find_victims(
                wl,
                cq,
                assignment.need,
                self._members.get(cq.node.root(), (cq,)),
                self._queues.__getitem__,
                self._cycle,
                self.fair_sharing,
            )
            if victims is not None:
                keys = tuple(v.key for v in victims.workloads)
                # Victims already being evicted free their quota anyway: only the rest are new.
                fresh = tuple(v for v in victims.workloads if v.phase is Phase.ADMITTED)
                for victim in fresh:
                    victim.phase = Phase.EVICTING
                wl.awaiting = set(keys)
                self._preemptors[wl.key] = wl
                self._reclaiming.add(cq.node.root())
                if fresh:
                    fresh_kinds = {v.key: victims.kinds[v.key] for v in fresh}
                    kinds = set(fresh_kinds.values())
                    kind = kinds.pop() if len(kinds) == 1 else PreemptionReason.RECLAIM_WITHIN_COHORT
                    why = f"preempted to admit {wl.key} (priority {spec.priority}) in ClusterQueue {cq.name}"
                    out.append(Preempt(tuple(v.key for v in fresh), why, wl.key, kind, fresh_kinds))
                self._pend(out, wl, f"waiting for {len(keys)} preempted workload(s) to release quota")
                return _Outcome.PREEMPTING
            if not spec.replaces:
                self._no_victims[victims_key] = reason
                if not newer_matters:
                    self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        elif not spec.replaces:
            self._no_fit[(cq.name, wl.shape)] = reason
            self._verdict = Verdict(VerdictBasis.CACHE, self._cache_generation)
        return self._not_admitted(wl, cq, out, reason)

    def _not_admitted(
        self, wl: WorkloadState, cq: ClusterQueueState, out: list[Decision], reason: str
    ) -> _Outcome:
        self._pend(out, wl, reason)
        if cq.spec.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO:
            cq.park(wl)
        return _Outcome.BLOCKED

    def _awaited(self, wl: WorkloadState) -> int:
        """How many of the workload's victims still hold quota."""
        workloads = self._workloads
        return sum(1 for k in wl.awaiting if k in workloads and workloads[k].phase is Phase.EVICTING)

    def _pend(self, out: list[Decision], wl: WorkloadState, reason: str) -> None:
        if wl.reason != reason:
            wl.reason = reason
            out.append(Pending(wl.key, reason, wl.cluster_queue))

    # --------------------------------------------------------------- queries

    def usage(self, cluster_queue: str) -> dict[FlavorResource, int]:
        """Quota held by admitted (and evicting) workloads of the queue, per flavor and resource."""
        return dict(self._queues[cluster_queue].node.usage)

    def workload(self, key: str) -> WorkloadStatus | None:
        wl = self._workloads.get(key)
        if wl is None:
            return None
        return WorkloadStatus(
            wl.key,
            wl.phase,
            wl.cluster_queue,
            wl.reason,
            dict(wl.usage),
            wl.pod_sets,
            None if wl.phase is Phase.PENDING else wl.admitted_at,
        )

    def workload_keys(self) -> list[str]:
        return list(self._workloads)

    def cluster_queue_status(self, name: str) -> ClusterQueueStatus:
        cq = self._queues[name]
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

    def cluster_queue_names(self) -> list[str]:
        return list(self._queues)

    def available(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """How much more of a resource the queue could be admitted right now, borrowing included."""
        return available(self._queues[cluster_queue].node, (flavor, resource))

    def snapshot(self) -> list[NodeSnapshot]:
        """Every node of the cohort tree (ClusterQueues first), as plain values."""
        nodes = [*self._tree.cluster_queues.values(), *self._tree.cohorts.values()]
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

    def cohort_cycles(self) -> list[list[str]]:
        return [list(c) for c in self._tree.cycles]

    # --------------------------------------------------------------- internals

    def _local_queue_key(self, spec: Workload) -> str:
        return f"{spec.namespace}/{spec.queue_name}"

    def _route(self, wl: WorkloadState) -> None:
        spec = wl.spec
        if not spec.active:
            self._make_unrouted(wl, f"workload {wl.key} is inactive")
            return
        local_queue = self._local_queues.get(self._local_queue_key(spec))
        if local_queue is None:
            self._make_unrouted(wl, f"LocalQueue {self._local_queue_key(spec)} does not exist")
            return
        cq = self._queues.get(local_queue.cluster_queue)
        if cq is None or cq.name in self._deleting:
            self._make_unrouted(wl, f"ClusterQueue {local_queue.cluster_queue} does not exist")
            return
        self._unrouted.pop(wl.key, None)
        wl.cluster_queue = cq.name
        # With LowerOrNewerEqualPriority a workload's age decides what it may preempt, so it
        # is not quite like its parked look-alikes: it is judged on its own.
        newer_matters = (
            cq.spec.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        )
        cq.add_pending(wl, join_parked=not newer_matters)

    def _make_unrouted(self, wl: WorkloadState, reason: str | None = None) -> None:
        wl.cluster_queue = None
        self._unrouted[wl.key] = wl
        if reason is None:
            local_key = self._local_queue_key(wl.spec)
            reason = f"LocalQueue {local_key} does not exist"
            lq = self._local_queues.get(local_key)
            if lq is not None:
                reason = f"ClusterQueue {lq.cluster_queue} does not exist"
        self._pend(self._outbox, wl, reason)

    def _reroute_unrouted(self) -> None:
        for wl in list(self._unrouted.values()):
            self._route(wl)

    def _pending_of_local_queue(self, local_key: str) -> list[WorkloadState]:
        return [
            wl
            for wl in self._workloads.values()
            if wl.phase is Phase.PENDING and self._local_queue_key(wl.spec) == local_key
        ]

    def _remove_from_queue(self, wl: WorkloadState) -> None:
        self._unrouted.pop(wl.key, None)
        if wl.cluster_queue is not None and wl.phase is Phase.PENDING:
            cq = self._queues.get(wl.cluster_queue)
            if cq is not None:
                cq.remove_pending(wl)

    def _admit(
        self,
        wl: WorkloadState,
        cq: ClusterQueueState,
        usage: dict[FlavorResource, int],
        pod_sets: tuple[PodSetAssignment, ...],
        predecessor: WorkloadState | None,
    ) -> None:
        cq.active.pop(wl.key, None)
        self._charge(wl, cq.name, usage, pod_sets)
        self._new_victim_candidate(wl, cq)
        if predecessor is not None:
            # The slice takes over: the predecessor's pods now count as the slice's.
            self._forget(predecessor)

    def _charge(
        self,
        wl: WorkloadState,
        cluster_queue: str,
        usage: dict[FlavorResource, int],
        pod_sets: tuple[PodSetAssignment, ...],
    ) -> None:
        cq = self._queues[cluster_queue]
        for fr, amount in usage.items():
            add_usage(cq.node, fr, amount)
        self._usage_changed(cq)
        self._admission_seq += 1
        wl.phase = Phase.ADMITTED
        wl.cluster_queue = cluster_queue
        wl.usage = usage
        wl.pod_sets = pod_sets
        wl.admitted_seq = self._admission_seq
        wl.admitted_cycle = self._cycle
        wl.admitted_at = self._now
        wl.reason = ""
        cq.admitted[wl.key] = wl

    def _free(self, wl: WorkloadState) -> None:
        """Give back the quota an admitted or evicting workload holds."""
        if wl.cluster_queue is None:
            return
        cq = self._queues.get(wl.cluster_queue)
        if cq is None:
            return
        for fr, amount in wl.usage.items():
            add_usage(cq.node, fr, -amount)
        self._usage_changed(cq)
        cq.admitted.pop(wl.key, None)
        wl.usage = {}
        wl.pod_sets = ()
        self._capacity_changed(cq)
        if cq.name in self._deleting and not cq.admitted:
            self._deleting.discard(cq.name)
            self._cluster_queue_specs.pop(cq.name, None)
            self._rebuild()

    def _forget(self, wl: WorkloadState) -> None:
        if wl.phase is Phase.PENDING:
            self._remove_from_queue(wl)
        else:
            self._free(wl)
        self._workloads.pop(wl.key, None)
        self._preemptors.pop(wl.key, None)
        if wl.spec.replaces:
            predecessor = self._workloads.get(wl.spec.replaces)
            if predecessor is not None and predecessor.successor == wl.key:
                predecessor.successor = None

    def _scale_down(self, wl: WorkloadState, workload: Workload) -> None:
        flavors_of = {ps.name: ps.flavors for ps in wl.pod_sets}
        usage: dict[FlavorResource, int] = {}
        assignments: list[PodSetAssignment] = []
        for pod_set in workload.pod_sets:
            totals = pod_set.totals()
            flavors = flavors_of.get(pod_set.name, {})
            for resource, amount in totals.items():
                if resource not in flavors:
                    raise ValueError(
                        f"workload {wl.key}: pod set {pod_set.name} needs {resource} that its admission "
                        "does not cover; submit a replacement slice instead"
                    )
                fr = (flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
            assignments.append(PodSetAssignment(pod_set.name, pod_set.count, dict(flavors), totals))
        for fr, amount in usage.items():
            if amount > wl.usage.get(fr, 0):
                raise ValueError(
                    f"workload {wl.key}: demand for {fr[1]} in flavor {fr[0]} grew while admitted; "
                    "submit a replacement slice (Workload.replaces) for a scale-up"
                )
        assert wl.cluster_queue is not None
        cq = self._queues[wl.cluster_queue]
        for fr in set(wl.usage) | set(usage):
            delta = usage.get(fr, 0) - wl.usage.get(fr, 0)
            if delta:
                add_usage(cq.node, fr, delta)
        self._usage_changed(cq)
        wl.usage = usage
        wl.pod_sets = tuple(assignments)
        self._capacity_changed(cq)

    def _drain(
        self,
        victims: list[WorkloadState],
        reason: str,
        kind: PreemptionReason = PreemptionReason.STOPPED,
    ) -> None:
        victims = [v for v in victims if v.phase is Phase.ADMITTED]
        if not victims:
            return
        for victim in victims:
            victim.phase = Phase.EVICTING
        keys = tuple(v.key for v in victims)
        self._outbox.append(Preempt(keys, reason, None, kind, {k: kind for k in keys}))

    def _capacity_changed(self, cq: ClusterQueueState) -> None:
        """Quota was freed: parked workloads that might now fit go back to the active queue."""
        self._clear_fit_caches()
        for member in self._members.get(cq.node.root(), (cq,)):
            member.unpark()

    def _new_victim_candidate(self, wl: WorkloadState, cq: ClusterQueueState) -> None:
        """A fresh admission may be what a parked workload could preempt: let those try again."""
        priority = wl.spec.priority
        borrowing = any(cq.node.usage.get(fr, 0) > q.nominal for fr, q in cq.node.quota.items())
        for member in self._members.get(cq.node.root(), (cq,)):
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

    def _unpark_everything(self) -> None:
        for cq in self._queues.values():
            cq.unpark()

    def _rebuild(self) -> None:
        self._tree.rebuild(self._cluster_queue_specs, self._cohort_specs)
        queues: dict[str, ClusterQueueState] = {}
        for name, spec in self._cluster_queue_specs.items():
            node = self._tree.cluster_queues[name]
            state = self._queues.get(name)
            if state is None:
                state = ClusterQueueState(spec, node)
            else:
                state.set_spec(spec, node)
            queues[name] = state
        for name, state in self._queues.items():
            if name not in queues:
                for wl in state.pending_workloads():
                    if wl.group is not None:
                        wl.group.remove(wl)
                    self._make_unrouted(wl)
        self._queues = queues
        self._members = {}
        # Verdicts naming an old root must not stand: the tree and its usage were rebuilt.
        self._usage_epochs = {root: epoch + 1 for root, epoch in self._usage_epochs.items()}
        for state in queues.values():
            self._members.setdefault(state.node.root(), []).append(state)
        self._unpark_everything()
        self._reroute_unrouted()


def _order(wl: WorkloadState) -> Order:
    return wl.order
