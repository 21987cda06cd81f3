"""Waiting in tests: poll with a deadline, never sleep as synchronisation.

- `wait_for` / `wait_for_async`: until something happens (the async one keeps the event loop
  free for what the test waits on; its probe may be a coroutine function).
- `wait_while_progressing`: until something happens, for as long as the step before it is
  seen advancing (a slow machine's honest slowness), not for a fixed time.
- `holds`: that something stays true for a while (a window in which nothing may happen).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 60.0, interval_s: float = 0.2) -> T:
    """Poll until probe() returns something truthy; fail with the last value seen."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last seen: {last!r}")


async def wait_for_async(
    what: str,
    probe: Callable[[], T | None] | Callable[[], Awaitable[T | None]],
    timeout_s: float = 60.0,
    interval_s: float = 0.2,
) -> T:
    """`wait_for` inside an event loop: sleeps without blocking it; `probe` may be async."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        value = probe()
        last = await value if inspect.isawaitable(value) else value  # type: ignore[assignment]
        if last:
            return last
        await asyncio.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last seen: {last!r}")


def wait_while_progressing(
    what: str,
    probe: Callable[[], T | None],
    progress: Callable[[], object],
    *,
    stall_s: float,
    limit_s: float,
    interval_s: float = 0.5,
    describe: Callable[[], str] = lambda: "",
) -> T:
    """Poll until probe() returns something truthy. The deadline is ``stall_s`` after the last
    change of ``progress()`` (a value that changes as the awaited step advances: a start
    attempt, a pod's phase, a node joining), and never later than ``limit_s`` after the start.
    On timeout the failure says which deadline passed, the last progress seen and ``describe()``
    (what the step's logs and objects said last)."""
    started = time.monotonic()
    seen = progress()
    moved = started
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        now = time.monotonic()
        current = progress()
        if current != seen:
            seen, moved = current, now
        if now - moved > stall_s or now - started > limit_s:
            why = f"no progress for {stall_s}s" if now - moved > stall_s else f"the limit of {limit_s}s"
            raise AssertionError(
                f"timed out after {now - started:.0f}s ({why}) waiting for {what}; last seen: {last!r}; "
                f"last progress: {seen!r}\n{describe()}"
            )
        time.sleep(interval_s)


def holds(what: str, check: Callable[[], object], seconds: float, interval_s: float = 0.5) -> None:
    """Sample check() every `interval_s` for `seconds` (at least once); fail at the first sample
    that returns something falsy other than None (a check returning None asserts by itself)."""
    until = time.monotonic() + seconds
    while True:
        result = check()
        assert result or result is None, f"{what} stopped holding: {result!r}"
        if time.monotonic() >= until:
            return
        time.sleep(interval_s)
