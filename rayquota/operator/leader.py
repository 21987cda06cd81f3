"""Leader election on a `coordination.k8s.io/v1` Lease, so several operator replicas can run
while exactly one reconciles.

The pure part (`observe`, `decide`, `claimed_spec`, `released_spec`) takes what was read from the
API server plus the local monotonic time and says what to do; `LeaderElector` does the I/O.

Expiry is judged the way client-go judges it: never by comparing the holder's `renewTime` with our
wall clock (the clocks of two pods may disagree), but by how long, on our own monotonic clock, the
lease has looked unchanged. A lease is free once it has not changed for `leaseDurationSeconds`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import enum
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from rayquota.operator.kube import ApiError, Conflict, group_path

log = logging.getLogger("rayquota.leader")

LEASE_NAME = "rayquota-operator"


# --- settings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseSettings:
    name: str = LEASE_NAME
    namespace: str = "default"
    duration_s: float = 15.0
    renew_period_s: float = 5.0
    # A leader that could not renew for this long steps down. Shorter than the duration so it has
    # stopped before any other replica may consider the lease expired.
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if self.duration_s < 1:
            raise ValueError("lease duration must be at least 1 s")
        if not 0 < self.renew_period_s < self.renew_deadline_s < self.duration_s:
            raise ValueError(
                "need 0 < renew period < renew deadline < lease duration, got "
                f"{self.renew_period_s} / {self.renew_deadline_s} / {self.duration_s}"
            )
        if not 0 < self.retry_period_s < self.renew_deadline_s:
            raise ValueError("the retry period must be positive and shorter than the renew deadline")


def new_identity() -> str:
    """Unique per process: a restarted pod (same hostname) must not inherit its predecessor's lease."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


# --- pure decision logic ----------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseRecord:
    """The spec of a Lease as read, plus its resourceVersion (for guarded updates)."""

    holder: str | None
    duration_s: int
    renew_time: str | None = None
    acquire_time: str | None = None
    transitions: int = 0
    resource_version: str = field(default="", compare=False)

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or None,
            duration_s=int(spec.get("leaseDurationSeconds") or 0),
            renew_time=spec.get("renewTime"),
            acquire_time=spec.get("acquireTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )


@dataclass(frozen=True)
class Observation:
    record: LeaseRecord
    # Local monotonic time at which this exact record content was first seen.
    observed_at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """Restart the expiry clock only when the lease's content changed since the last look."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


class Action(enum.Enum):
    CREATE = "create"  # no lease yet
    RENEW = "renew"  # we hold it
    TAKE_OVER = "take-over"  # released or expired: claim it
    WAIT = "wait"  # someone else holds a live lease


@dataclass(frozen=True)
class Decision:
    action: Action
    holder: str | None = None
    # For WAIT: how long the lease must stay unchanged before it may be taken over.
    expires_in_s: float = 0.0


def decide(identity: str, observation: Observation | None, now: float) -> Decision:
    if observation is None:
        return Decision(Action.CREATE)
    record = observation.record
    if record.holder == identity:
        return Decision(Action.RENEW, holder=identity)
    if record.holder is None:
        return Decision(Action.TAKE_OVER)
    remaining = observation.observed_at + record.duration_s - now
    if remaining <= 0:
        return Decision(Action.TAKE_OVER, holder=record.holder)
    return Decision(Action.WAIT, holder=record.holder, expires_in_s=remaining)


def micro_time(moment: dt.datetime) -> str:
    """The API's MicroTime format (RFC 3339 with microseconds, UTC)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claimed_spec(
    action: Action, identity: str, record: LeaseRecord | None, duration_s: float, wall_now: dt.datetime
) -> dict[str, Any]:
    """The Lease spec to write for CREATE, RENEW or TAKE_OVER."""
    now = micro_time(wall_now)
    spec: dict[str, Any] = {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, round(duration_s)),
        "renewTime": now,
        "acquireTime": now,
        "leaseTransitions": 0,
    }
    if record is None or action is Action.CREATE:
        return spec
    if action is Action.RENEW:
        spec["acquireTime"] = record.acquire_time or now
        spec["leaseTransitions"] = record.transitions
    elif action is Action.TAKE_OVER:
        spec["leaseTransitions"] = record.transitions + 1
    else:
        raise ValueError(f"nothing to write for {action}")
    return spec


def released_spec(record: LeaseRecord, wall_now: dt.datetime) -> dict[str, Any]:
    """No holder: the next replica to look takes over without waiting for expiry."""
    spec: dict[str, Any] = {
        "leaseDurationSeconds": 1,
        "renewTime": micro_time(wall_now),
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    return spec


# --- I/O ---------------------------------------------------------------------------------------


class LeaseClient(Protocol):
    """The subset of `KubeClient` the elector uses (a fake in tests)."""

    async def get(self, path: str) -> dict[str, Any] | None: ...

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...

    def clone(self) -> LeaseClient:
        """Same server and credentials, own connections: for another thread's event loop."""
        ...

    async def close(self) -> None: ...


_TRANSIENT = (ApiError, aiohttp.ClientError, TimeoutError)


class LeaderElector:
    def __init__(
        self,
        client: LeaseClient,
        settings: LeaseSettings,
        identity: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.settings = settings
        self.identity = identity
        self._clock = clock
        self._wall_clock = wall_clock
        self._observed: Observation | None = None
        # The renewal thread of a running hold(): its outcome (cancel it to stop) and the thread.
        self._renewal: tuple[concurrent.futures.Future[str], threading.Thread] | None = None
        self._path = group_path("coordination.k8s.io", "v1", settings.namespace, "leases", settings.name)
        self._collection = group_path("coordination.k8s.io", "v1", settings.namespace, "leases")

    @property
    def observed_holder(self) -> str | None:
        return self._observed.record.holder if self._observed else None

    async def try_acquire_or_renew(self) -> bool:
        """One round: read the lease, decide, write. True when we hold the lease afterwards."""
        return await self._acquire_or_renew_with(self.client)

    async def _acquire_or_renew_with(self, client: LeaseClient) -> bool:
        lease = await client.get(self._path)
        now = self._clock()
        if lease is None:
            self._observed = None
        else:
            self._observed = observe(self._observed, LeaseRecord.from_lease(lease), now)
        decision = decide(self.identity, self._observed, now)
        if decision.action is Action.WAIT:
            return False
        record = self._observed.record if self._observed else None
        spec = claimed_spec(
            decision.action, self.identity, record, self.settings.duration_s, self._wall_clock()
        )
        metadata: dict[str, Any] = {"name": self.settings.name, "namespace": self.settings.namespace}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}
        try:
            if decision.action is Action.CREATE:
                written = await client.request("POST", self._collection, body=body)
            else:
                assert record is not None
                # The resourceVersion guard makes the write fail with 409 if anyone wrote in between.
                metadata["resourceVersion"] = record.resource_version
                written = await client.request("PUT", self._path, body=body)
        except Conflict:
            log.debug("lost the race for lease %s/%s", self.settings.namespace, self.settings.name)
            return False
        self._observed = Observation(LeaseRecord.from_lease(written), self._clock())
        if decision.action is not Action.RENEW:
            log.info(
                "acquired leadership of lease %s/%s as %s (transitions %d)",
                self.settings.namespace,
                self.settings.name,
                self.identity,
                spec["leaseTransitions"],
            )
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Block until we hold the lease (True) or `stop` is set (False)."""
        last_logged: str | None = "-"
        while not stop.is_set():
            try:
                async with asyncio.timeout(self.settings.renew_deadline_s):
                    if await self.try_acquire_or_renew():
                        return True
            except _TRANSIENT as exc:
                log.warning("leader election: cannot reach lease %s: %s", self._path, exc)
            holder = self.observed_holder
            if holder != last_logged:
                # A holder that stopped cleanly released the lease; one that was killed (or lost
                # its terminal before SIGHUP was handled) leaves it to expire.
                log.info(
                    "waiting for leadership of lease %s/%s, held by %s: taken over once it is "
                    "released, or after %.0f s without renewal",
                    self.settings.namespace,
                    self.settings.name,
                    holder,
                    self.settings.duration_s,
                )
                last_logged = holder
            await _wait(stop, self.settings.retry_period_s)
        return False

    async def hold(self) -> str:
        """Renew until leadership is lost; returns why. Runs until cancelled while we lead.

        Renewal runs on a thread of its own, with its own event loop and client: the operator's
        loop may stall (a burst of reconciles, a slow call) for longer than the lease, and a
        renewal queued behind that stall would give up a lease the process is fit to hold.
        """
        outcome: concurrent.futures.Future[str] = concurrent.futures.Future()
        thread = threading.Thread(
            target=asyncio.run, args=(self._renew_on_own_loop(outcome),), name="lease-renewal", daemon=True
        )
        self._renewal = (outcome, thread)
        thread.start()
        try:
            # Cancelling this await cancels `outcome`, which stops the renewal loop.
            return await asyncio.wrap_future(outcome)
        finally:
            await self._stop_renewal()

    async def _stop_renewal(self) -> None:
        """Stop the renewal thread and wait for it: a renewal still in flight must not race
        release()'s write. Bounded by the renew deadline (the longest a renewal may take)."""
        if self._renewal is None:
            return
        outcome, thread = self._renewal
        outcome.cancel()
        await asyncio.to_thread(thread.join, self.settings.renew_deadline_s)
        self._renewal = None

    async def _renew_on_own_loop(self, outcome: concurrent.futures.Future[str]) -> None:
        client = self.client.clone()
        loop = asyncio.get_running_loop()
        renewing = asyncio.create_task(self._renew_until_lost(client))

        def stop_renewing(_: concurrent.futures.Future[str]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has already finished
                loop.call_soon_threadsafe(renewing.cancel)

        outcome.add_done_callback(stop_renewing)
        try:
            reason = await renewing
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                outcome.set_result(reason)
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                outcome.set_exception(exc)
        finally:
            await client.close()

    async def _renew_until_lost(self, client: LeaseClient) -> str:
        last_renewed = self._clock()
        while True:
            await asyncio.sleep(self.settings.renew_period_s)
            while True:
                started = self._clock()
                remaining = self.settings.renew_deadline_s - (started - last_renewed)
                if remaining <= 0:
                    return f"could not renew the lease for {started - last_renewed:.1f}s"
                renewed = False
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._acquire_or_renew_with(client)
                except _TRANSIENT as exc:
                    log.warning("leader election: renewing lease %s failed: %s", self._path, exc)
                if renewed:
                    # Count from before the request: the server may have written it at any point since.
                    last_renewed = started
                    break
                holder = self.observed_holder
                if holder is not None and holder != self.identity:
                    return f"the lease is now held by {holder}"
                await asyncio.sleep(min(self.settings.retry_period_s, max(0.0, remaining)))

    async def release(self) -> bool:
        """Clear the holder if it is still us, so a standby takes over at once."""
        # hold() may only have been cancelled, not yet finished: its renewals end first.
        await self._stop_renewal()
        try:
            async with asyncio.timeout(self.settings.retry_period_s * 2):
                lease = await self.client.get(self._path)
                if lease is None:
                    return False
                record = LeaseRecord.from_lease(lease)
                if record.holder != self.identity:
                    return False
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.settings.name,
                        "namespace": self.settings.namespace,
                        "resourceVersion": record.resource_version,
                    },
                    "spec": released_spec(record, self._wall_clock()),
                }
                await self.client.request("PUT", self._path, body=body)
        except _TRANSIENT as exc:
            log.warning("leader election: could not release lease %s: %s", self._path, exc)
            return False
        log.info("released lease %s/%s", self.settings.namespace, self.settings.name)
        return True


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
