"""Routing: which ClusterQueue a pending workload waits in.

Kueue's queue manager does this: a workload names a LocalQueue of its namespace, the LocalQueue
names a ClusterQueue, and the workload waits in that queue's line. A workload whose LocalQueue
or ClusterQueue does not exist (yet), or that is inactive, waits unrouted with that reason, and
is routed again whenever the configuration changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..model import LocalQueue, Workload
from ..policies import WithinClusterQueuePolicy
from ..quota.accounting import Accounting
from ..quota.state import Phase, WorkloadState

Tell = Callable[[WorkloadState, str], None]
"""Gives a workload its pending reason (the engine turns it into a Pending decision)."""


def local_queue_key(spec: Workload) -> str:
    return f"{spec.namespace}/{spec.queue_name}"


def inactive_reason(key: str) -> str:
    """Why a deactivated workload (``spec.active`` false) waits: it is not routed at all."""
    return f"workload {key} is inactive"


def missing_local_queue(key: str) -> str:
    return f"LocalQueue {key} does not exist"


def missing_cluster_queue(name: str) -> str:
    return f"ClusterQueue {name} does not exist"


_MISSING_QUEUE = re.compile(r"^(LocalQueue|ClusterQueue) \S+ does not exist$")


def names_a_missing_queue(reason: str) -> bool:
    """The pending reason is a missing LocalQueue or ClusterQueue: a mistake to correct (a typo
    in the queue label), not a turn to wait for."""
    return bool(_MISSING_QUEUE.match(reason))


class Router:
    def __init__(self, accounting: Accounting, tell: Tell, clock: Callable[[], float]) -> None:
        self.accounting = accounting
        self.tell = tell
        self.clock = clock
        """The moment of the last cycle: a workload whose ``requeue_at`` is later waits unrouted."""
        self.local_queues: dict[str, LocalQueue] = {}
        self.unrouted: dict[str, WorkloadState] = {}
        self.backing_off: dict[str, float] = {}
        """Unrouted workloads waiting for their ``requeue_at``, and when that is."""

    def route(self, wl: WorkloadState) -> None:
        """Put a pending workload in its ClusterQueue's line, or unrouted with the reason."""
        spec = wl.spec
        if not spec.active:
            self.backing_off.pop(wl.key, None)
            self.make_unrouted(wl, inactive_reason(wl.key))
            return
        if spec.requeue_at > self.clock():
            self.backing_off[wl.key] = spec.requeue_at
            self.make_unrouted(wl, "waiting for its requeue backoff to end (requeueState.requeueAt)")
            return
        self.backing_off.pop(wl.key, None)
        local_queue = self.local_queues.get(local_queue_key(spec))
        if local_queue is None:
            self.make_unrouted(wl, missing_local_queue(local_queue_key(spec)))
            return
        cq = self.accounting.queues.get(local_queue.cluster_queue)
        if cq is None or cq.name in self.accounting.deleting:
            self.make_unrouted(wl, missing_cluster_queue(local_queue.cluster_queue))
            return
        self.unrouted.pop(wl.key, None)
        wl.cluster_queue = cq.name
        # With LowerOrNewerEqualPriority a workload's age decides what it may preempt, so it
        # is not quite like its look-alikes (parked or awake): it is judged on its own.
        newer_matters = (
            cq.spec.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        )
        cq.add_pending(wl, join_look_alikes=not newer_matters)

    def make_unrouted(self, wl: WorkloadState, reason: str | None = None) -> None:
        wl.cluster_queue = None
        self.unrouted[wl.key] = wl
        if reason is None:
            local_key = local_queue_key(wl.spec)
            reason = missing_local_queue(local_key)
            lq = self.local_queues.get(local_key)
            if lq is not None:
                reason = missing_cluster_queue(lq.cluster_queue)
        self.tell(wl, reason)

    def reroute_unrouted(self) -> None:
        for wl in list(self.unrouted.values()):
            self.route(wl)

    def route_due(self, now: float) -> None:
        """Workloads whose backoff ended by ``now`` join their lines."""
        for key, when in sorted(self.backing_off.items(), key=lambda item: (item[1], item[0])):
            if when <= now:
                wl = self.unrouted.get(key)
                self.backing_off.pop(key, None)
                if wl is not None:
                    self.route(wl)

    def remove_from_queue(self, wl: WorkloadState) -> None:
        """Take a pending workload out of its line (or out of the unrouted)."""
        self.unrouted.pop(wl.key, None)
        self.backing_off.pop(wl.key, None)
        if wl.cluster_queue is not None and wl.phase is Phase.PENDING:
            cq = self.accounting.queues.get(wl.cluster_queue)
            if cq is not None:
                cq.remove_pending(wl)

    def unroute_local_queue(self, key: str, workloads: Iterable[WorkloadState]) -> None:
        """The LocalQueue `key` went away or points elsewhere now: its pending workloads leave
        their lines (and are routed again by the caller, once the configuration is current)."""
        for wl in [w for w in workloads if w.phase is Phase.PENDING and local_queue_key(w.spec) == key]:
            self.remove_from_queue(wl)
            self.make_unrouted(wl)
