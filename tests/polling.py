"""Waiting in tests: poll with a deadline, never sleep as synchronisation.

- `wait_for` / `wait_for_async`: until something happens (the async one keeps the event loop
  free for what the test waits on; its probe may be a coroutine function).
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
