"""NewClusterWithIncrementalUpgrade: the next step of capacity and traffic, as plain values.

Two clusters share the service while an upgrade runs: the active (old) one and the pending (new)
one. Each has a Serve ``target_capacity`` (percent of its replicas Serve keeps) and a share of the
HTTPRoute's traffic. One step at a time:

1. the pending cluster's capacity grows by at most ``maxSurgePercent`` (only while the two
   capacities add up to at most 100, so the surge never exceeds ``100 + maxSurgePercent``);
2. traffic moves to the pending cluster by ``stepSizePercent`` every ``intervalSeconds``, never past
   its capacity and only while it is healthy;
3. once its traffic has caught up with its capacity, the active cluster's capacity shrinks by
   ``maxSurgePercent`` (down to what its remaining traffic needs) and the loop repeats;
4. done at pending 100 % capacity and traffic, active 0 %.

A rollback (the spec went back to the active cluster's config mid-upgrade) runs the same loop in
the other direction, at the same pace: traffic returns first, then the active cluster regrows
and the pending one shrinks to 0. Traffic returns whether or not the pending cluster is healthy.

Every invariant the tests check holds after every step: each cluster's traffic <= its capacity,
traffic adds up to 100, and the two capacities add up to at most 100 + maxSurgePercent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

FULL = 100


@dataclass(frozen=True)
class UpgradeOptions:
    """clusterUpgradeOptions, with KubeRay's default maxSurgePercent."""

    step_size_percent: int
    interval_seconds: int
    max_surge_percent: int = FULL


@dataclass(frozen=True)
class ClusterShare:
    """What one of the two clusters holds: Serve capacity and routed traffic (percent)."""

    target_capacity: int
    traffic_percent: int
    last_traffic_migrated: datetime | None = None


@dataclass(frozen=True)
class UpgradeProgress:
    active: ClusterShare
    pending: ClusterShare

    @classmethod
    def start(cls) -> UpgradeProgress:
        """Before the first step: the active cluster holds everything."""
        return cls(active=ClusterShare(FULL, FULL), pending=ClusterShare(0, 0))

    @property
    def upgrade_done(self) -> bool:
        return (
            self.pending.target_capacity == FULL
            and self.pending.traffic_percent == FULL
            and self.active.target_capacity == 0
        )

    @property
    def rollback_done(self) -> bool:
        return (
            self.active.target_capacity == FULL
            and self.active.traffic_percent == FULL
            and self.pending.target_capacity == 0
        )


@dataclass(frozen=True)
class Step:
    """What one reconcile changes (at most one of capacity or traffic) and when to look again."""

    progress: UpgradeProgress
    capacity_changed: bool = False
    traffic_changed: bool = False
    # Seconds until the next traffic move is allowed (None: nothing is waiting on the clock).
    wait_s: float | None = None
    # Why nothing moved, in words (for the UpgradeInProgress condition and events).
    waiting_for: str = ""


def next_step(
    progress: UpgradeProgress,
    options: UpgradeOptions,
    *,
    now: datetime,
    pending_healthy: bool,
    rolling_back: bool = False,
) -> Step:
    """The next change of an incremental upgrade (or rollback), given the current shares."""
    if rolling_back:
        return _next_rollback_step(progress, options, now)
    return _next_upgrade_step(progress, options, now, pending_healthy)


def _next_upgrade_step(
    progress: UpgradeProgress, options: UpgradeOptions, now: datetime, pending_healthy: bool
) -> Step:
    active, pending = progress.active, progress.pending
    if progress.upgrade_done:
        return Step(progress)
    if pending.traffic_percent == pending.target_capacity:
        # Traffic has caught up with the pending cluster's capacity: move capacity.
        if active.target_capacity + pending.target_capacity <= FULL and pending.target_capacity < FULL:
            grown = min(FULL, pending.target_capacity + options.max_surge_percent)
            return Step(
                replace(progress, pending=replace(pending, target_capacity=grown)), capacity_changed=True
            )
        shrunk = max(FULL - pending.traffic_percent, active.target_capacity - options.max_surge_percent, 0)
        if shrunk < active.target_capacity:
            return Step(
                replace(progress, active=replace(active, target_capacity=shrunk)), capacity_changed=True
            )
        return Step(progress, waiting_for="capacity cannot move")
    if not pending_healthy:
        return Step(progress, waiting_for="the pending cluster's Serve applications are not healthy")
    wait = _seconds_until_next_move(pending.last_traffic_migrated, options, now)
    if wait > 0:
        return Step(progress, wait_s=wait, waiting_for=f"the next traffic step in {wait:.0f}s")
    moved = min(FULL, pending.traffic_percent + options.step_size_percent, pending.target_capacity)
    return Step(_route(progress, pending_percent=moved, now=now, toward_pending=True), traffic_changed=True)


def _next_rollback_step(progress: UpgradeProgress, options: UpgradeOptions, now: datetime) -> Step:
    active, pending = progress.active, progress.pending
    if progress.rollback_done:
        return Step(progress)
    if active.traffic_percent == active.target_capacity:
        if active.target_capacity + pending.target_capacity > FULL or active.target_capacity == FULL:
            shrunk = max(
                FULL - active.traffic_percent, pending.target_capacity - options.max_surge_percent, 0
            )
            if shrunk < pending.target_capacity:
                return Step(
                    replace(progress, pending=replace(pending, target_capacity=shrunk)), capacity_changed=True
                )
        grown = min(FULL, active.target_capacity + options.max_surge_percent)
        if grown > active.target_capacity:
            return Step(
                replace(progress, active=replace(active, target_capacity=grown)), capacity_changed=True
            )
        return Step(progress, waiting_for="capacity cannot move")
    wait = _seconds_until_next_move(active.last_traffic_migrated, options, now)
    if wait > 0:
        return Step(progress, wait_s=wait, waiting_for=f"the next traffic step back in {wait:.0f}s")
    moved = min(FULL, active.traffic_percent + options.step_size_percent, active.target_capacity)
    return Step(
        _route(progress, pending_percent=FULL - moved, now=now, toward_pending=False), traffic_changed=True
    )


def _route(
    progress: UpgradeProgress, *, pending_percent: int, now: datetime, toward_pending: bool
) -> UpgradeProgress:
    """Set the split; the receiving cluster's clock restarts (it paces the next move)."""
    active = replace(progress.active, traffic_percent=FULL - pending_percent)
    pending = replace(progress.pending, traffic_percent=pending_percent)
    if toward_pending:
        pending = replace(pending, last_traffic_migrated=now)
    else:
        active = replace(active, last_traffic_migrated=now)
    return UpgradeProgress(active=active, pending=pending)


def _seconds_until_next_move(last: datetime | None, options: UpgradeOptions, now: datetime) -> float:
    if last is None:
        return 0.0
    due = last + timedelta(seconds=options.interval_seconds)
    return max(0.0, (due - now).total_seconds())
