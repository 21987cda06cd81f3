"""What the MultiKueue check controller does with one Workload of the manager: a pure decision
over what the manager records and what each worker shows.

The rules, in order:

1. A workload that holds no reservation (pending, evicted, finished, deleted) or whose check
   says Retry or Rejected has no copy anywhere: every copy in a reachable worker is removed (one
   in an unreachable worker is removed when it is back).
2. A copy made for an earlier reservation (its attempt differs) is removed; if it ran there (a
   lost worker back), its pods are stopped at once.
3. Check Ready: the workload runs in ``status.clusterName``. There, its object is kept in step
   (created, status mirrored, spec follow-ups); copies elsewhere are removed. If that worker's
   copy is gone, evicted or no longer admitted, the check goes Retry. If the worker is
   unreachable, the workload keeps its place until ``workerLostTimeout`` has passed since the
   worker was lost, then the check goes Retry (the workload is requeued and dispatched again).
4. Check Pending: the first worker whose copy was admitted wins (the earliest admission; a
   worker that already holds the object wins first): the object is created there, the other
   copies removed, and the check turns Ready naming it.
5. Otherwise the workload is copied to the nominated workers (every reachable one; with the
   MostFreeQuota dispatcher the one with the most room for it; with the Incremental dispatcher
   the first ``step`` workers by name, ``step`` more each round while it waits) and removed from
   the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rayquota.operator.queue.multikueue.settings import Dispatcher
from rayquota.queueing import CheckState


@dataclass(frozen=True)
class RemoteCopy:
    """A worker's copy of the Workload (and whether the object was created there)."""

    attempt: str
    admitted_at: str | None = None  # the Admitted condition's transition time while True
    evicted: bool = False
    finished: bool = False
    has_object: bool = False


@dataclass(frozen=True)
class Worker:
    name: str
    reachable: bool
    lost_since: float | None = None  # epoch seconds, while unreachable
    copy: RemoteCopy | None = None  # what a reachable worker shows
    stray_object: bool = False  # an object of ours without a current copy (a half-done step)
    room: float = 0.0  # MostFreeQuota: how many more workloads like this one fit


@dataclass(frozen=True)
class Local:
    state: CheckState
    attempt: str
    reserved: bool
    done: bool = False  # finished, deleted, or its object gone
    cluster_name: str | None = None
    nominated: tuple[str, ...] = ()
    pending_since: float = 0.0  # when the check became Pending (epoch seconds)


@dataclass(frozen=True)
class Policy:
    dispatcher: Dispatcher = Dispatcher.ALL_AT_ONCE
    worker_lost_timeout_s: float = 300.0
    nomination_timeout_s: float = 60.0
    incremental_step: int = 3
    incremental_round_s: float = 300.0


@dataclass
class Plan:
    delete: list[str] = field(default_factory=list)
    # Of those, the workers whose copy was made for an earlier reservation and may still run
    # (a lost worker back): its pods are stopped at once, not through the worker's cascade.
    fence: list[str] = field(default_factory=list)
    create: list[str] = field(default_factory=list)
    sync: str | None = None
    nominate: tuple[str, ...] | None = None
    ready: str | None = None  # the winner: check Ready, status.clusterName
    retry: str | None = None  # the message of a Retry
    requeue_after_s: float | None = None

    def wait(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.requeue_after_s = seconds if self.requeue_after_s is None else min(self.requeue_after_s, seconds)


def decide(local: Local, workers: Sequence[Worker], policy: Policy, now: float) -> Plan:
    plan = Plan()
    reachable = {w.name: w for w in workers if w.reachable}
    holding = {name for name, w in reachable.items() if w.copy is not None or w.stray_object}
    if local.done or not local.reserved or local.state in (CheckState.RETRY, CheckState.REJECTED):
        plan.delete = sorted(holding)
        return plan
    current = {
        name: w.copy
        for name, w in reachable.items()
        if w.copy is not None and w.copy.attempt == local.attempt and not w.stray_object
    }
    stale = holding - set(current)
    if local.state is CheckState.READY:
        _keep_running(local, workers, current, plan, policy, now)
    else:
        _dispatch(local, workers, list(reachable.values()), current, plan, policy, now)
    plan.delete = sorted(set(plan.delete) | stale)
    plan.fence = sorted(
        name
        for name in stale
        if reachable[name].stray_object or (reachable[name].copy or RemoteCopy("")).has_object
    )
    # A stale copy is replaced by the next reconcile (its deletion's event brings it back).
    plan.create = [name for name in plan.create if name not in plan.delete]
    return plan


def _keep_running(
    local: Local,
    workers: Sequence[Worker],
    current: dict[str, RemoteCopy],
    plan: Plan,
    policy: Policy,
    now: float,
) -> None:
    chosen = local.cluster_name
    plan.delete = sorted(name for name in current if name != chosen)
    worker = next((w for w in workers if w.name == chosen), None)
    if chosen is None or worker is None:
        plan.retry = f"the worker it was admitted in ({chosen or 'none recorded'}) is not in the config"
        return
    if not worker.reachable:
        since = worker.lost_since if worker.lost_since is not None else now
        remaining = since + policy.worker_lost_timeout_s - now
        if remaining > 0:
            plan.wait(remaining)
        else:
            lost_for = now - since
            plan.retry = (
                f"worker {chosen} unreachable for {lost_for:.0f}s "
                f"(workerLostTimeout {policy.worker_lost_timeout_s:.0f}s): dispatched again"
            )
        return
    copy = current.get(chosen)
    if copy is None:
        plan.retry = f"its copy in worker {chosen} is gone"
    elif copy.finished:
        plan.sync = chosen  # the final status comes back; the workload finishes here
    elif copy.evicted or copy.admitted_at is None:
        plan.retry = f"its copy in worker {chosen} was evicted there"
    else:
        plan.sync = chosen


def _dispatch(
    local: Local,
    workers: Sequence[Worker],
    reachable: list[Worker],
    current: dict[str, RemoteCopy],
    plan: Plan,
    policy: Policy,
    now: float,
) -> None:
    admitted = [
        (not copy.has_object, copy.admitted_at or "", name)
        for name, copy in current.items()
        if copy.admitted_at is not None and not copy.evicted
    ]
    if admitted:
        winner = min(admitted)[2]
        plan.delete = sorted(name for name in current if name != winner)
        plan.sync = winner
        plan.ready = winner
        return
    if policy.dispatcher is Dispatcher.INCREMENTAL:
        nominated = _incremental(local, workers, policy, now, plan)
    else:
        nominated = _nominees(local, reachable, policy, now, plan)
    if sorted(nominated) != sorted(local.nominated):
        plan.nominate = nominated
    can_reach = {w.name for w in reachable}
    plan.create = [name for name in nominated if name not in current and name in can_reach]
    plan.delete = sorted(name for name in current if name not in nominated)


def _nominees(
    local: Local, reachable: list[Worker], policy: Policy, now: float, plan: Plan
) -> tuple[str, ...]:
    everyone = tuple(sorted(w.name for w in reachable))
    if policy.dispatcher is Dispatcher.ALL_AT_ONCE or not reachable:
        return everyone
    widen_at = local.pending_since + policy.nomination_timeout_s
    if now >= widen_at:
        return everyone
    plan.wait(widen_at - now)
    kept = tuple(sorted(local.nominated))
    if kept and set(kept) <= {w.name for w in reachable}:
        return kept  # sticky until the timeout: a copy is not moved while it waits
    # Most room first; among equals the config's order (the order of ``reachable``).
    ranked = sorted(enumerate(reachable), key=lambda item: (-item[1].room, item[0]))
    best = ranked[0][1]
    return (best.name,) if best.room >= 1 else everyone


def _incremental(
    local: Local, workers: Sequence[Worker], policy: Policy, now: float, plan: Plan
) -> tuple[str, ...]:
    """Kueue's Incremental dispatcher: the workers in the MultiKueueConfig's order (Kueue
    v0.19's default, its ``MultiKueueIncrementalDispatcherRespectConfigOrder`` gate on), ``step``
    of them in the first round and ``step`` more each round while the workload has not been
    admitted; a round's nominees stay nominated (an unreachable one gets its copy when it is
    back)."""
    ordered = [w.name for w in workers]
    step = max(1, policy.incremental_step)
    waited = max(0.0, now - local.pending_since)
    rounds = 1 + int(waited // policy.incremental_round_s)
    if rounds * step < len(ordered):
        plan.wait(rounds * policy.incremental_round_s - waited)
    return tuple(ordered[: rounds * step])
