"""A preemptor takes workloads already being evicted first, and evicts nobody new when they suffice."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue, Preemption, WithinClusterQueuePolicy

from .builders import engine_with_flavors, gpu_group, gpus, queue, used
from .test_examples import admitted, pending, preempts


def test_a_second_preemptor_waits_for_a_victim_already_leaving() -> None:
    e = engine_with_flavors("h100")
    lower = Preemption(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None)), preemption=lower))
    e.add_workload(gpus("a", "low1", 2, priority=1, created=0))
    e.add_workload(gpus("a", "low2", 2, priority=1, created=1))
    assert admitted(e.run_cycle()) == ["a/low1", "a/low2"]
    e.add_workload(gpus("a", "high1", 2, priority=5, created=2))
    (first,) = preempts(e.run_cycle())
    assert first.victims == ("a/low2",)  # the most recently admitted
    e.delete_workload("a/high1")  # gone before its victim's pods are
    e.add_workload(gpus("a", "high2", 2, priority=5, created=3))
    decisions = e.run_cycle()
    # low2's 2 GPUs are leaving anyway: high2 waits for them instead of evicting low1 too.
    assert preempts(decisions) == []
    assert pending(decisions)["a/high2"] == "waiting for 1 preempted workload(s) to release quota"
    e.release("a/low2")
    assert admitted(e.run_cycle()) == ["a/high2"]
    assert e.workload("a/low1").phase == "Admitted"  # type: ignore[union-attr]
    assert used(e, "a") == 4
