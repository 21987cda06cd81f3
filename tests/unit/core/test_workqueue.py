from __future__ import annotations

import asyncio
import random

import pytest

from rayquota.operator.core.workqueue import Backoff, ShutDown, WorkQueue


async def test_duplicate_adds_collapse() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_a_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # never to two workers at once
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_add_after_keeps_the_earliest_timer() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 30.0)
    queue.add_after("a", 0.01)
    queue.add_after("a", 60.0)
    assert queue.waiting_timers == 1
    assert await asyncio.wait_for(queue.get(), timeout=5) == "a"
    assert queue.waiting_timers == 0


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    backoff = Backoff(base_s=0.005, max_s=300.0, jitter=0.2)
    rng = random.Random(1)
    delays = [backoff.delay(n, rng) for n in range(1, 30)]
    for n, delay in enumerate(delays, start=1):
        ceiling = min(300.0, 0.005 * 2 ** (n - 1))
        assert 0.8 * ceiling <= delay <= ceiling
    assert delays[-1] > 200.0  # it reaches minutes, then stays capped
    assert len({round(d, 9) for d in delays[:10]}) == 10


async def test_rate_limited_failures_back_off_and_forget_resets() -> None:
    queue: WorkQueue[str] = WorkQueue(Backoff(base_s=1.0, max_s=100.0, jitter=0.0))
    assert queue.add_rate_limited("a") == 1.0
    assert queue.add_rate_limited("a") == 2.0
    assert queue.add_rate_limited("a") == 4.0
    assert queue.failures("a") == 3
    queue.forget("a")
    assert queue.failures("a") == 0
    assert queue.add_rate_limited("a") == 1.0
    queue.shut_down()


async def test_shut_down_wakes_waiting_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)  # let the worker start waiting
    queue.shut_down()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(waiter, timeout=5)


async def test_add_soon_goes_after_urgent_keys_and_before_routine_ones() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("routine")
    queue.add("arrival")
    queue.add_soon("arrival")  # moves ahead of routine keys; its stale copy is skipped
    queue.add_soon("new")
    queue.add_first("decided")
    assert len(queue) == 4
    assert [await queue.get() for _ in range(4)] == ["decided", "arrival", "new", "routine"]
    assert len(queue) == 0


async def test_add_first_jumps_the_queue_without_duplicating_a_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add_first("c")
    queue.add_first("d")
    assert len(queue) == 4
    assert [await queue.get() for _ in range(4)] == ["c", "d", "a", "b"]  # urgent ones in their order
    assert len(queue) == 0  # the stale copy of "c" is skipped, not handed out twice
    queue.add_first("a")  # still processing: handed out again only after done
    assert len(queue) == 0
    queue.done("a")
    assert await queue.get() == "a"


async def test_a_key_added_ahead_while_processing_keeps_its_place_ahead() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("decided")
    key = await queue.get()
    queue.add("routine")
    queue.add_soon("decided")
    queue.add_first("decided")  # the more urgent lane wins
    queue.done(key)
    queue.add_first("other")
    assert [await queue.get() for _ in range(3)] == ["decided", "other", "routine"]
    assert len(queue) == 0


async def test_polls_wait_behind_routine_keys_and_a_routine_add_moves_one_up() -> None:
    queue: WorkQueue[str] = WorkQueue(poll_max_wait_s=60.0)
    queue.add_poll("poll-1")
    queue.add_poll("poll-2")
    queue.add_poll("poll-2")  # one entry per key, as for routine keys
    queue.add("routine")
    queue.add_soon("arrival")
    queue.add("poll-2")  # a watch event for a polled key: it waits as a routine key now
    assert len(queue) == 4
    assert [await queue.get() for _ in range(4)] == ["arrival", "routine", "poll-2", "poll-1"]
    assert len(queue) == 0  # the stale poll copy of "poll-2" is skipped


async def test_overdue_polls_take_every_other_turn_while_other_keys_wait() -> None:
    now = [100.0]
    queue: WorkQueue[str] = WorkQueue(poll_max_wait_s=2.0, clock=lambda: now[0])
    queue.add_poll("poll")
    queue.add("routine")
    now[0] += 1.9
    queue.add("later")
    assert await queue.get() == "routine"
    now[0] += 0.1  # the poll has waited 2 s
    assert [await queue.get() for _ in range(2)] == ["poll", "later"]
    # A full queue: overdue polls and routine keys alternate, neither lane starves the other.
    for key in ("p1", "p2", "p3"):
        queue.add_poll(key)
    now[0] += 5.0
    for key in ("r1", "r2", "r3"):
        queue.add(key)
    assert [await queue.get() for _ in range(6)] == ["p1", "r1", "p2", "r2", "p3", "r3"]


async def test_a_poll_timer_fires_into_the_poll_lane_unless_a_routine_wake_up_is_merged() -> None:
    queue: WorkQueue[str] = WorkQueue(poll_max_wait_s=60.0)
    queue.add_after("polled", 0.01, poll=True)
    queue.add_after("merged", 0.01, poll=True)
    queue.add_after("merged", 30.0)  # a routine wake-up: the earliest time, in the routine lane
    assert queue.waiting_timers == 2
    await asyncio.wait_for(_until(lambda: queue.waiting_timers == 0), timeout=5)
    queue.add("routine")
    assert [await queue.get() for _ in range(3)] == ["merged", "routine", "polled"]


async def _until(condition: object) -> None:
    assert callable(condition)
    while not condition():
        await asyncio.sleep(0.005)
