"""The incremental-upgrade step calculator: every step respects the options, upgrades and
rollbacks terminate, and the clock paces traffic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rayquota.operator.ray.rayservice.incremental import (
    ClusterShare,
    UpgradeOptions,
    UpgradeProgress,
    next_step,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def walk(
    options: UpgradeOptions, progress: UpgradeProgress, *, rolling_back: bool = False, limit: int = 1000
) -> list[UpgradeProgress]:
    """Step until done, advancing the clock whenever a traffic move waits on it."""
    now = T0
    seen = [progress]
    for _ in range(limit):
        step = next_step(progress, options, now=now, pending_healthy=True, rolling_back=rolling_back)
        if step.wait_s:
            now += timedelta(seconds=step.wait_s)
            continue
        if not (step.capacity_changed or step.traffic_changed):
            return seen
        assert not (step.capacity_changed and step.traffic_changed), "one change per step"
        check_step(seen[-1], step.progress, options)
        progress = step.progress
        seen.append(progress)
    raise AssertionError(f"no end after {limit} steps: {progress}")


def check_step(before: UpgradeProgress, after: UpgradeProgress, options: UpgradeOptions) -> None:
    for share in (after.active, after.pending):
        assert 0 <= share.traffic_percent <= share.target_capacity <= 100
    assert after.active.traffic_percent + after.pending.traffic_percent == 100
    assert after.active.target_capacity + after.pending.target_capacity <= 100 + options.max_surge_percent
    moved = abs(after.pending.traffic_percent - before.pending.traffic_percent)
    assert moved <= options.step_size_percent
    for old, new in ((before.active, after.active), (before.pending, after.pending)):
        assert abs(new.target_capacity - old.target_capacity) <= options.max_surge_percent


@pytest.mark.parametrize(
    ("surge", "step", "expected"),
    [
        # (active capacity, pending capacity, pending traffic) after each change
        (
            50,
            25,
            [(100, 0, 0), (100, 50, 0), (100, 50, 25), (100, 50, 50), (50, 50, 50), (50, 100, 50),
             (50, 100, 75), (50, 100, 100), (0, 100, 100)],
        ),
        (100, 100, [(100, 0, 0), (100, 100, 0), (100, 100, 100), (0, 100, 100)]),
        (
            40,
            40,
            [(100, 0, 0), (100, 40, 0), (100, 40, 40), (60, 40, 40), (60, 80, 40), (60, 80, 80),
             (20, 80, 80), (20, 100, 80), (20, 100, 100), (0, 100, 100)],
        ),
    ],
)  # fmt: skip
def test_upgrade_walks_the_documented_steps(
    surge: int, step: int, expected: list[tuple[int, int, int]]
) -> None:
    options = UpgradeOptions(step_size_percent=step, interval_seconds=30, max_surge_percent=surge)
    seen = walk(options, UpgradeProgress.start())
    got = [(p.active.target_capacity, p.pending.target_capacity, p.pending.traffic_percent) for p in seen]
    assert got == expected
    assert seen[-1].upgrade_done


def test_traffic_waits_for_the_interval_and_for_health() -> None:
    options = UpgradeOptions(step_size_percent=10, interval_seconds=60, max_surge_percent=100)
    progress = UpgradeProgress(
        active=ClusterShare(100, 90), pending=ClusterShare(100, 10, last_traffic_migrated=T0)
    )
    early = next_step(progress, options, now=T0 + timedelta(seconds=20), pending_healthy=True)
    assert not early.traffic_changed and early.wait_s == pytest.approx(40)
    unhealthy = next_step(progress, options, now=T0 + timedelta(seconds=90), pending_healthy=False)
    assert not unhealthy.traffic_changed and "not healthy" in unhealthy.waiting_for
    due = next_step(progress, options, now=T0 + timedelta(seconds=60), pending_healthy=True)
    assert due.traffic_changed
    assert due.progress.pending.traffic_percent == 20 and due.progress.active.traffic_percent == 80
    assert due.progress.pending.last_traffic_migrated == T0 + timedelta(seconds=60)


def test_traffic_never_passes_the_pending_capacity() -> None:
    options = UpgradeOptions(step_size_percent=30, interval_seconds=1, max_surge_percent=40)
    progress = UpgradeProgress(active=ClusterShare(100, 70), pending=ClusterShare(40, 30))
    step = next_step(progress, options, now=T0, pending_healthy=True)
    assert step.progress.pending.traffic_percent == 40


def test_rollback_walks_back_at_the_same_pace() -> None:
    options = UpgradeOptions(step_size_percent=25, interval_seconds=30, max_surge_percent=50)
    # Mid-upgrade: the active cluster already shrank to 50 %, the pending one serves 75 %.
    mid = UpgradeProgress(active=ClusterShare(50, 25), pending=ClusterShare(100, 75))
    seen = walk(options, mid, rolling_back=True)
    got = [(p.active.target_capacity, p.pending.target_capacity, p.active.traffic_percent) for p in seen]
    assert got == [
        (50, 100, 25), (50, 100, 50), (50, 50, 50), (100, 50, 50),
        (100, 50, 75), (100, 50, 100), (100, 0, 100),
    ]  # fmt: skip
    assert seen[-1].rollback_done


def test_rollback_moves_traffic_even_when_the_pending_cluster_is_unhealthy() -> None:
    options = UpgradeOptions(step_size_percent=20, interval_seconds=10)
    progress = UpgradeProgress(active=ClusterShare(100, 60), pending=ClusterShare(100, 40))
    step = next_step(progress, options, now=T0, pending_healthy=False, rolling_back=True)
    assert step.traffic_changed and step.progress.active.traffic_percent == 80
    assert step.progress.active.last_traffic_migrated == T0


@given(
    surge=st.integers(min_value=1, max_value=100),
    step_fraction=st.floats(min_value=0.01, max_value=1.0),
    revert_after=st.integers(min_value=0, max_value=40),
)
def test_any_options_terminate_within_the_bounds(surge: int, step_fraction: float, revert_after: int) -> None:
    step = max(1, int(surge * step_fraction))
    options = UpgradeOptions(step_size_percent=step, interval_seconds=5, max_surge_percent=surge)
    seen = walk(options, UpgradeProgress.start())
    assert seen[-1].upgrade_done
    # A revert at any point of the same walk comes back to the active cluster.
    back = walk(options, seen[min(revert_after, len(seen) - 1)], rolling_back=True)
    assert back[-1].rollback_done
