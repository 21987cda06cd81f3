"""The test suite's waiting helpers fail when they should."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.polling import holds, wait_for, wait_for_async, wait_while_progressing


def test_wait_for_returns_the_first_truthy_value_and_fails_on_timeout() -> None:
    values = iter([0, None, 7])
    assert wait_for("a value", lambda: next(values), timeout_s=5, interval_s=0.01) == 7
    with pytest.raises(AssertionError, match="waiting for nothing"):
        wait_for("nothing", lambda: None, timeout_s=0.05, interval_s=0.01)


def test_wait_for_async_awaits_async_probes() -> None:
    calls = 0

    async def probe() -> int | None:
        nonlocal calls
        calls += 1
        return calls if calls == 3 else None

    assert asyncio.run(wait_for_async("the third call", probe, timeout_s=5, interval_s=0.01)) == 3
    with pytest.raises(AssertionError, match="timed out"):
        asyncio.run(wait_for_async("never", lambda: False, timeout_s=0.05, interval_s=0.01))


def test_wait_while_progressing_extends_its_deadline_while_progress_is_seen() -> None:
    # 30 polls of 0.01 s: well past the 0.05 s stall window, but each one is progress.
    steps = iter(range(1000))
    step = 0

    def advance() -> int:
        nonlocal step
        step = next(steps)
        return step

    got = wait_while_progressing(
        "the 30th step", lambda: step >= 30 or None, advance, stall_s=0.05, limit_s=5, interval_s=0.01
    )
    assert got is True


def test_wait_while_progressing_fails_on_a_stall_or_the_limit_saying_what_it_saw() -> None:
    with pytest.raises(AssertionError, match=r"\(no progress for 0.05s\).*last progress: 'stuck'\nthe logs"):
        wait_while_progressing(
            "never", lambda: None, lambda: "stuck", stall_s=0.05, limit_s=5, interval_s=0.01,
            describe=lambda: "the logs",
        )  # fmt: skip
    moving = iter(range(10**6))
    with pytest.raises(AssertionError, match=r"the limit of 0\.1s"):
        wait_while_progressing(
            "never", lambda: None, lambda: next(moving), stall_s=5, limit_s=0.1, interval_s=0.01
        )


def test_holds_samples_for_the_whole_window_and_fails_on_the_first_bad_sample() -> None:
    start = time.monotonic()
    samples: list[float] = []
    holds("always", lambda: samples.append(time.monotonic()) or True, seconds=0.1, interval_s=0.01)
    assert time.monotonic() - start >= 0.1 and len(samples) >= 2
    countdown = iter([True, True, False, True])
    with pytest.raises(AssertionError, match="stopped holding"):
        holds("until the third", lambda: next(countdown), seconds=5, interval_s=0.01)

    def asserting() -> None:
        raise AssertionError("the check's own assertion")

    with pytest.raises(AssertionError, match="own assertion"):
        holds("asserting", asserting, seconds=5, interval_s=0.01)
