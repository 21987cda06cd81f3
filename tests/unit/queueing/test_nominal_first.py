"""Within one cycle, what fits in a queue's own quota is admitted before anything that borrows.

Kueue orders a cycle's heads the same way. Without it, an older workload borrows the quota
another queue is entitled to, and that queue's newer workload reclaims it by preemption a
moment later: under steady arrivals the same workloads are admitted and evicted again and again.
"""

from __future__ import annotations

from rayquota.queueing import (
    ClusterQueue,
    Engine,
    Preemption,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)

from .builders import engine_with_flavors, gpu_group, gpus, queue, reclaiming_cohort, used
from .test_examples import admitted, pending, preempts


def two_queues_of_four() -> Engine:
    return reclaiming_cohort("a", "b", cohort="c")


def test_a_newer_workload_within_nominal_goes_before_an_older_borrower() -> None:
    e = two_queues_of_four()
    e.add_workload(gpus("a", "first", 4, created=0))  # a's own quota
    assert admitted(e.run_cycle()) == ["a/first"]
    # Both arrive before the next cycle: a's second would borrow b's idle quota, b's own fits in it.
    e.add_workload(gpus("a", "borrower", 4, created=1))
    e.add_workload(gpus("b", "owner", 4, created=2))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["b/owner"]
    assert preempts(decisions) == []
    assert "a/borrower" in pending(decisions)
    assert used(e, "a") == 4 and used(e, "b") == 4


def test_a_borrower_still_takes_what_nobody_is_entitled_to_in_the_same_cycle() -> None:
    e = two_queues_of_four()
    e.add_workload(gpus("a", "borrower", 6, created=0))
    e.add_workload(gpus("b", "small", 2, created=1))
    # b's 2 fit in its own quota; a's 6 borrow the 2 b leaves idle.
    assert sorted(admitted(e.run_cycle())) == ["a/borrower", "b/small"]
    assert used(e, "a") == 6 and used(e, "b") == 2


def test_priority_still_comes_first_a_higher_priority_borrower_goes_before_lower_priority_work() -> None:
    e = engine_with_flavors("h100")
    lower = Preemption(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=ReclaimWithinCohortPolicy.LOWER_PRIORITY,
    )
    for name in ("a", "b"):
        queue(e, ClusterQueue(name, gpu_group(("h100", 4, None, None)), cohort="c", preemption=lower))
    e.add_workload(gpus("a", "first", 4, priority=100, created=0))
    assert admitted(e.run_cycle()) == ["a/first"]
    # a's urgent one must borrow b's idle quota; b's own, of lower priority, fits in it.
    e.add_workload(gpus("a", "urgent", 4, priority=100, created=1))
    e.add_workload(gpus("b", "low", 4, priority=1, created=2))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["a/urgent"]
    assert "b/low" in pending(decisions)
    assert used(e, "a") == 8 and used(e, "b") == 0
