"""A queue at or above its nominal quota preempts only what it lacks (Kueue v0.19's classical
preemption): reclaiming, which means fitting within nominal, is tried only below it."""

from __future__ import annotations

from rayquota.queueing import (
    Engine,
)

from .builders import gpus, reclaiming_cohort, used
from .test_examples import admitted, preempts


def three_queues_of_four() -> Engine:
    return reclaiming_cohort("a", "b", "c", cohort="pool")


def test_a_queue_above_nominal_evicts_only_the_room_it_lacks() -> None:
    e = three_queues_of_four()
    for i in range(6):
        e.add_workload(gpus("a", f"a-low{i}", 1, priority=1, created=i))
        e.add_workload(gpus("c", f"c-low{i}", 1, priority=1, created=i))
    assert len(admitted(e.run_cycle())) == 12  # a and c borrow b's idle 4: the cohort is full
    assert used(e, "a") == 6 and used(e, "c") == 6
    e.add_workload(gpus("a", "high", 2, priority=5, created=10))
    (preempt,) = preempts(e.run_cycle())
    # a holds 6 of its 4: fitting within nominal would take 4 of its own workloads; 2 suffice
    # while it keeps borrowing (before, the 4 were evicted and 2 GPUs went to nobody).
    assert sorted(preempt.victims) == ["a/a-low4", "a/a-low5"]


def test_a_queue_below_nominal_still_reclaims_what_others_borrow() -> None:
    e = three_queues_of_four()
    for i in range(2):
        e.add_workload(gpus("a", f"a-low{i}", 1, priority=1, created=i))
    for i in range(10):
        e.add_workload(gpus("c", f"c-low{i}", 1, priority=1, created=i))
    assert len(admitted(e.run_cycle())) == 12
    assert used(e, "a") == 2 and used(e, "c") == 10
    e.add_workload(gpus("a", "high", 2, priority=5, created=20))
    (preempt,) = preempts(e.run_cycle())
    # a holds 2 of its 4: the 2 it is entitled to come back from c, which borrows; a keeps its own.
    assert len(preempt.victims) == 2 and all(v.startswith("c/") for v in preempt.victims)
