"""The Lease decision logic (pure) and the elector's behaviour against an in-memory Lease API."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import threading
import time
from typing import Any

import pytest

from rayquota.config import build, load
from rayquota.operator.kube import Conflict
from rayquota.operator.leader import (
    Action,
    LeaderElector,
    LeaseRecord,
    LeaseSettings,
    Observation,
    claimed_spec,
    decide,
    observe,
    released_spec,
)
from tests.polling import wait_for

ME = "pod-a-1-abc"
OTHER = "pod-b-2-def"
WALL = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)


def record(holder: str | None, *, renew: str = "t1", transitions: int = 3, rv: str = "10") -> LeaseRecord:
    return LeaseRecord(
        holder=holder,
        duration_s=15,
        renew_time=renew,
        acquire_time="t0",
        transitions=transitions,
        resource_version=rv,
    )


# --- decide ------------------------------------------------------------------------------------


def test_a_missing_lease_is_created() -> None:
    assert decide(ME, None, now=100.0).action is Action.CREATE


def test_our_own_lease_is_renewed() -> None:
    assert decide(ME, Observation(record(ME), observed_at=0.0), now=1000.0).action is Action.RENEW


def test_a_released_lease_is_taken_over_at_once() -> None:
    assert decide(ME, Observation(record(None), observed_at=100.0), now=100.0).action is Action.TAKE_OVER


def test_a_live_lease_of_another_holder_is_waited_for() -> None:
    decision = decide(ME, Observation(record(OTHER), observed_at=100.0), now=110.0)
    assert decision.action is Action.WAIT
    assert decision.holder == OTHER
    assert decision.expires_in_s == pytest.approx(5.0)


def test_a_lease_unchanged_for_its_duration_is_taken_over() -> None:
    observation = Observation(record(OTHER), observed_at=100.0)
    assert decide(ME, observation, now=114.9).action is Action.WAIT
    decision = decide(ME, observation, now=115.0)
    assert decision.action is Action.TAKE_OVER
    assert decision.holder == OTHER


def test_expiry_ignores_the_holders_wall_clock() -> None:
    # A renewTime far in the past (holder's clock behind) does not make a freshly seen lease expired.
    stale_clock = record(OTHER, renew="1970-01-01T00:00:00.000000Z")
    assert decide(ME, Observation(stale_clock, observed_at=500.0), now=501.0).action is Action.WAIT


# --- observe -----------------------------------------------------------------------------------


def test_an_unchanged_lease_keeps_its_first_observation_time() -> None:
    first = observe(None, record(OTHER), now=100.0)
    # A new resourceVersion with the same spec (e.g. a label edit) is no renewal.
    again = observe(first, record(OTHER, rv="11"), now=120.0)
    assert again.observed_at == 100.0
    assert decide(ME, again, now=120.0).action is Action.TAKE_OVER


def test_a_renewal_restarts_the_expiry_clock() -> None:
    first = observe(None, record(OTHER, renew="t1"), now=100.0)
    renewed = observe(first, record(OTHER, renew="t2", rv="11"), now=112.0)
    assert renewed.observed_at == 112.0
    assert decide(ME, renewed, now=120.0).action is Action.WAIT


def test_a_new_holder_restarts_the_expiry_clock() -> None:
    first = observe(None, record(OTHER), now=100.0)
    changed = observe(first, record("pod-c", transitions=4), now=114.0)
    assert changed.observed_at == 114.0


# --- specs -------------------------------------------------------------------------------------


def test_create_starts_with_zero_transitions() -> None:
    spec = claimed_spec(Action.CREATE, ME, None, 15, WALL)
    assert spec == {
        "holderIdentity": ME,
        "leaseDurationSeconds": 15,
        "renewTime": "2026-01-02T03:04:05.678901Z",
        "acquireTime": "2026-01-02T03:04:05.678901Z",
        "leaseTransitions": 0,
    }


def test_renew_keeps_acquire_time_and_transitions() -> None:
    spec = claimed_spec(Action.RENEW, ME, record(ME, transitions=7), 15, WALL)
    assert spec["acquireTime"] == "t0"
    assert spec["leaseTransitions"] == 7
    assert spec["renewTime"] == "2026-01-02T03:04:05.678901Z"


def test_take_over_counts_a_transition_and_resets_acquire_time() -> None:
    spec = claimed_spec(Action.TAKE_OVER, ME, record(OTHER, transitions=7), 4, WALL)
    assert spec["holderIdentity"] == ME
    assert spec["leaseTransitions"] == 8
    assert spec["acquireTime"] == spec["renewTime"]
    assert spec["leaseDurationSeconds"] == 4


def test_waiting_has_nothing_to_write() -> None:
    with pytest.raises(ValueError):
        claimed_spec(Action.WAIT, ME, record(OTHER), 15, WALL)


def test_release_clears_the_holder_and_keeps_transitions() -> None:
    spec = released_spec(record(ME, transitions=5), WALL)
    assert "holderIdentity" not in spec
    assert spec["leaseTransitions"] == 5
    assert spec["leaseDurationSeconds"] == 1


# --- settings ----------------------------------------------------------------------------------


def _lease(env: dict[str, str], **flags: object) -> LeaseSettings:
    given = {f"leaderElection.{key}": (f"--{key}", value) for key, value in flags.items()}
    settings = build.lease(load(env=env, flags=given).configuration)
    assert settings is not None
    return settings


def test_settings_from_env_scale_with_the_duration() -> None:
    settings = _lease({"RAYQUOTA_LEASE_DURATION": "3", "RAYQUOTA_OPERATOR_NAMESPACE": "ops"})
    assert settings.namespace == "ops"
    assert settings.duration_s == 3
    assert settings.renew_period_s < settings.renew_deadline_s < settings.duration_s


def test_settings_defaults_and_precedence() -> None:
    assert _lease({}) == LeaseSettings()
    settings = _lease(
        {"RAYQUOTA_LEASE_NAMESPACE": "lease-ns", "RAYQUOTA_OPERATOR_NAMESPACE": "ops"}, leaseDuration=30
    )
    assert settings.namespace == "lease-ns"
    assert settings.duration_s == 30
    assert _lease({"RAYQUOTA_LEASE_NAMESPACE": "x"}, resourceNamespace="arg").namespace == "arg"


def test_inconsistent_periods_are_refused() -> None:
    with pytest.raises(ValueError):
        LeaseSettings(duration_s=10, renew_period_s=5, renew_deadline_s=12)
    with pytest.raises(ValueError):
        LeaseSettings(duration_s=15, renew_period_s=11)


# --- the elector against an in-memory Lease API -------------------------------------------------


class FakeLeaseApi:
    """Stores one Lease; enforces resourceVersion guards like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.fail = False
        self.gets = 0
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def clone(self) -> FakeLeaseApi:
        # One store, as two clients of one API server would see.
        return self

    async def close(self) -> None:
        pass

    async def get(self, path: str) -> dict[str, Any] | None:
        self.gets += 1
        if self.fail:
            raise TimeoutError("api server unreachable")
        return copy.deepcopy(self.lease)

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        if self.fail:
            raise TimeoutError("api server unreachable")
        self.writes.append((method, copy.deepcopy(body)))
        if method == "POST":
            if self.lease is not None:
                raise Conflict(method, path, 409, "exists")
        elif method == "PUT":
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise Conflict(method, path, 409, "the object has been modified")
        else:
            raise AssertionError(method)
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    def holder(self) -> str | None:
        return None if self.lease is None else self.lease["spec"].get("holderIdentity")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: FakeLeaseApi, identity: str, clock: Clock) -> LeaderElector:
    settings = LeaseSettings(
        namespace="ns", duration_s=15, renew_period_s=0.01, renew_deadline_s=10, retry_period_s=0.01
    )
    return LeaderElector(api, settings, identity, clock=clock, wall_clock=lambda: WALL)


async def test_two_electors_exactly_one_leads_until_the_lease_expires() -> None:
    api, clock = FakeLeaseApi(), Clock()
    a, b = elector(api, ME, clock), elector(api, OTHER, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert api.holder() == ME
    clock.now += 14  # b first saw the lease at 1000; it stays a's for 15 s of b's observation
    assert not await b.try_acquire_or_renew()
    clock.now += 1.5
    assert await b.try_acquire_or_renew()
    assert api.holder() == OTHER
    assert api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1
    # The old leader now sees another holder and does not renew over it.
    assert not await a.try_acquire_or_renew()
    assert a.observed_holder == OTHER


async def test_renewals_keep_a_standby_waiting() -> None:
    api, clock = FakeLeaseApi(), Clock()
    a, b = elector(api, ME, clock), elector(api, OTHER, clock)
    assert await a.try_acquire_or_renew()
    for _ in range(5):
        assert not await b.try_acquire_or_renew()
        clock.now += 10
        assert await a.try_acquire_or_renew()  # renewTime changes, so b's clock restarts
    assert not await b.try_acquire_or_renew()
    assert api.holder() == ME


async def test_a_stale_resource_version_loses_the_race() -> None:
    api, clock = FakeLeaseApi(), Clock()
    a, b = elector(api, ME, clock), elector(api, OTHER, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 16
    # a renews between b's read and b's write: b's guarded update must fail.
    original_get = api.get

    async def get_then_a_renews(path: str) -> dict[str, Any] | None:
        seen = await original_get(path)
        api.get = original_get  # type: ignore[method-assign]
        assert await a.try_acquire_or_renew()
        return seen

    api.get = get_then_a_renews  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()
    assert api.holder() == ME
    assert api.writes[-1][0] == "PUT" and api.writes[-1][1]["spec"]["holderIdentity"] == OTHER


async def test_release_hands_over_at_once() -> None:
    api, clock = FakeLeaseApi(), Clock()
    a, b = elector(api, ME, clock), elector(api, OTHER, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a.release()
    assert api.holder() is None
    assert await b.try_acquire_or_renew()  # no waiting for expiry
    assert api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1
    assert not await a.release()  # no longer ours: left alone
    assert api.holder() == OTHER


async def leading_on_the_real_clock(api: FakeLeaseApi) -> LeaderElector:
    """A leader of a 1 s lease, renewing every 50 ms, that gives up after 0.4 s without renewal."""
    settings = LeaseSettings(
        namespace="ns", duration_s=1.0, renew_period_s=0.05, renew_deadline_s=0.4, retry_period_s=0.05
    )
    leader = LeaderElector(api, settings, ME)
    assert await leader.try_acquire_or_renew()
    return leader


async def test_hold_returns_when_renewal_fails_past_the_deadline() -> None:
    api = FakeLeaseApi()
    leader = await leading_on_the_real_clock(api)
    api.fail = True
    reason = await asyncio.wait_for(leader.hold(), timeout=5)
    assert "could not renew" in reason


async def test_hold_returns_at_once_when_deposed() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = elector(api, ME, clock)
    assert await leader.try_acquire_or_renew()
    assert api.lease is not None
    api.lease["spec"]["holderIdentity"] = OTHER
    api.lease["metadata"]["resourceVersion"] = "99"
    reason = await asyncio.wait_for(leader.hold(), timeout=5)
    assert OTHER in reason


async def test_acquire_waits_until_stopped() -> None:
    api, clock = FakeLeaseApi(), Clock()
    a, b = elector(api, ME, clock), elector(api, OTHER, clock)
    assert await a.try_acquire_or_renew()
    stop = asyncio.Event()
    looked = api.gets
    waiting = asyncio.create_task(b.acquire(stop))
    # Polled from a worker thread, so this event loop stays free to run b.
    await asyncio.to_thread(wait_for, "b to look twice", lambda: api.gets >= looked + 2, 10, 0.01)
    assert not waiting.done()
    stop.set()
    assert await asyncio.wait_for(waiting, timeout=5) is False
    assert api.holder() == ME


async def test_a_blocked_event_loop_does_not_starve_renewal() -> None:
    api = FakeLeaseApi()
    leader = await leading_on_the_real_clock(api)
    holding = asyncio.create_task(leader.hold())
    # Polled from a worker thread, so this event loop stays free to start the renewal.
    await asyncio.to_thread(wait_for, "the first renewal", lambda: len(api.writes) >= 2, 10, 0.01)
    renewed_before = len(api.writes)
    # The stall under test: this event loop (the operator's) does nothing for longer than the lease.
    time.sleep(leader.settings.duration_s * 1.5)
    renewals_while_blocked = len(api.writes) - renewed_before
    assert renewals_while_blocked >= 3, "the lease was not renewed while the event loop was blocked"
    assert api.holder() == ME
    assert not holding.done()
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert "lease-renewal" not in {thread.name for thread in threading.enumerate()}


async def test_release_right_after_cancelling_hold_ends_the_renewals_first() -> None:
    api = FakeLeaseApi()
    leader = await leading_on_the_real_clock(api)
    holding = asyncio.create_task(leader.hold())
    await asyncio.to_thread(wait_for, "the first renewal", lambda: len(api.writes) >= 2, 10, 0.01)
    holding.cancel()  # the operator releases without waiting for the cancelled task to finish
    assert await leader.release()
    assert "lease-renewal" not in {thread.name for thread in threading.enumerate()}
    assert api.holder() is None
    assert api.writes[-1][1]["spec"].get("holderIdentity") is None  # no renewal came after the release
