"""The admission loop runs no cycle while a scale-down's smaller admission is unwritten: the
quota it freed goes to no one before the Workload's status says it is free (the integration
test tests/integration/queue/test_scale_down_order.py shows what happens otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from rayquota.operator.queue import admission_loop
from rayquota.operator.queue.admission_loop import AdmissionLoop


async def _until(what: str, probe: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout_s}s: {what}"
        await asyncio.sleep(0.01)


async def running_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[AdmissionLoop, list[float], asyncio.Task[None]]:
    """An admission loop running, its driver's cycles counted, past its first cycle."""
    loop = AdmissionLoop()
    cycles: list[float] = []
    monkeypatch.setattr(loop.driver, "cycle", lambda now: cycles.append(now) or [])
    runner = asyncio.create_task(loop.run(lambda: []))
    await asyncio.wait_for(loop.restored.wait(), 1)
    loop.request_cycle()
    await _until("the first cycle", lambda: len(cycles) == 1)
    return loop, cycles, runner


async def test_cycles_wait_for_the_smaller_admission_to_be_written(monkeypatch: pytest.MonkeyPatch) -> None:
    loop, cycles, runner = await running_loop(monkeypatch)
    loop.hold_freed_quota("ns/shrinking")
    loop.request_cycle()
    await asyncio.sleep(0.3)
    assert len(cycles) == 1, "a cycle ran while the smaller admission was unwritten"
    loop.freed_quota_written("ns/shrinking")
    await _until("the write's end brings the cycle", lambda: len(cycles) > 1)
    runner.cancel()


async def test_a_write_that_never_comes_holds_the_cycles_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(admission_loop, "FREED_QUOTA_HOLD_S", 0.3)
    loop, cycles, runner = await running_loop(monkeypatch)
    loop.hold_freed_quota("ns/stuck")
    loop.request_cycle()
    await asyncio.sleep(0.1)
    assert len(cycles) == 1
    await _until("the cycle after the hold's limit", lambda: len(cycles) > 1)
    assert "was not written within" in caplog.text
    runner.cancel()
