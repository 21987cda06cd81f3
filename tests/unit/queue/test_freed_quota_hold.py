"""The admission loop runs no cycle while a status write that frees quota (a scale-down's smaller
admission, a Finished job) is not stored: the quota it freed goes to no one before the Workload's
status says it is free, however long the write takes (the integration test
tests/integration/queue/test_scale_down_order.py shows what happens otherwise)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from rayquota.operator.queue.admission import admission_loop
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.reporting import metrics


async def _until(what: str, probe: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout_s}s: {what}"
        await asyncio.sleep(0.01)


class Freeing:
    """What the Workload reconciler does: the engine frees quota and the loop is told to hold it,
    in one step (no await between); the cycles record whether they saw freed quota unwritten."""

    def __init__(self, loop: AdmissionLoop) -> None:
        self.loop = loop
        self.unwritten: set[str] = set()
        self.cycles_past_unwritten: list[set[str]] = []
        self.cycles = 0

    def cycle(self, _now: float) -> list[object]:
        self.cycles += 1
        if self.unwritten:
            self.cycles_past_unwritten.append(set(self.unwritten))
        return []

    def free(self, workload: str) -> None:
        self.unwritten.add(workload)
        self.loop.hold_freed_quota(workload)

    def written(self, workload: str) -> None:
        self.unwritten.discard(workload)
        self.loop.freed_quota_written(workload)


async def running_loop(
    monkeypatch: pytest.MonkeyPatch, clock: Callable[[], float] | None = None
) -> tuple[AdmissionLoop, Freeing, asyncio.Task[None]]:
    """An admission loop running, its driver's cycles observed, past its first cycle."""
    loop = AdmissionLoop() if clock is None else AdmissionLoop(clock=clock)
    freeing = Freeing(loop)
    monkeypatch.setattr(loop.driver, "cycle", freeing.cycle)
    runner = asyncio.create_task(loop.run(lambda: []))
    await asyncio.wait_for(loop.restored.wait(), 1)
    loop.request_cycle()
    await _until("the first cycle", lambda: freeing.cycles == 1)
    return loop, freeing, runner


async def test_cycles_wait_for_the_smaller_admission_to_be_written(monkeypatch: pytest.MonkeyPatch) -> None:
    loop, freeing, runner = await running_loop(monkeypatch)
    freeing.free("ns/shrinking")
    loop.request_cycle()
    await asyncio.sleep(0.3)
    assert freeing.cycles == 1, "a cycle ran while the smaller admission was unwritten"
    freeing.written("ns/shrinking")
    await _until("the write's end brings the cycle", lambda: freeing.cycles > 1)
    assert freeing.cycles_past_unwritten == []
    runner.cancel()


async def test_a_write_held_past_the_old_ten_second_bound_still_holds_every_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hold used to end after 10 s with a warning, and the quota went on unwritten."""
    loop, freeing, runner = await running_loop(monkeypatch)
    freeing.free("ns/slow")
    deadline = asyncio.get_running_loop().time() + 11.0
    while asyncio.get_running_loop().time() < deadline:
        loop.request_cycle()  # events keep asking for cycles meanwhile
        await asyncio.sleep(0.25)
    assert freeing.cycles_past_unwritten == [], "freed quota was given on before its write landed"
    assert freeing.cycles == 1
    freeing.written("ns/slow")
    await _until("the cycle once the write landed", lambda: freeing.cycles == 2)
    runner.cancel()


@pytest.mark.parametrize("turns", range(8))
async def test_a_hold_taken_in_the_turn_before_a_cycle_stops_that_cycle(
    monkeypatch: pytest.MonkeyPatch, turns: int
) -> None:
    """The reconcile that frees quota may run in any event-loop turn between the loop's wake-up
    and its cycle (the loop yields once to gather the turn's events): the hold counts in each."""
    # No floor between cycles: past its first cycle the loop waits for the next wake-up at once.
    monkeypatch.setattr(admission_loop, "MIN_CYCLE_GAP_S", 0.0)
    loop, freeing, runner = await running_loop(monkeypatch)
    loop.request_cycle()
    for _ in range(turns):
        await asyncio.sleep(0)
    freeing.free("ns/shrinking")
    await asyncio.sleep(0.2)
    assert freeing.cycles_past_unwritten == [], f"a cycle ran on unwritten freed quota ({turns} turns)"
    freeing.written("ns/shrinking")
    await _until(
        "the cycle once the write landed", lambda: freeing.cycles_past_unwritten == [] and freeing.cycles >= 2
    )
    runner.cancel()


async def test_the_wait_is_told_in_a_warning_and_a_gauge(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    loop, freeing, runner = await running_loop(monkeypatch, clock=lambda: now[0])
    caplog.set_level(logging.WARNING)
    freeing.free("ns/stuck")
    assert metrics.CYCLES_WAITING_FOR_WRITES._value.get() == 1
    assert loop.freeing_writes.awaited() == {"ns/stuck": 0.0}
    now[0] += 3600.0  # an hour unwritten (the API server refusing it, say): still no cycle
    loop.request_cycle()
    await _until("the warning", lambda: "Workload ns/stuck, unwritten for 3600s" in caplog.text)
    assert freeing.cycles == 1
    freeing.written("ns/stuck")
    await _until("the cycle once written", lambda: freeing.cycles == 2)
    assert metrics.CYCLES_WAITING_FOR_WRITES._value.get() == 0
    runner.cancel()
