"""Which queues a workload's Requeued condition waits for: the kind of a drain's eviction, and
which of a LocalQueue and its ClusterQueue run."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue, LocalQueue, Preempt, PreemptionReason, StopPolicy

from .builders import engine_with_flavors, gpu_group, gpus, queue


def test_a_local_queue_drain_evicts_with_its_own_kind() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.add_workload(gpus("a", "w", 4))
    e.run_cycle()
    e.upsert_local_queue(LocalQueue("a", "q", "a", stop_policy=StopPolicy.HOLD_AND_DRAIN))
    (drain,) = [d for d in e.run_cycle() if isinstance(d, Preempt)]
    assert drain.victims == ("a/w",)
    assert drain.victim_kinds == {"a/w": PreemptionReason.LOCAL_QUEUE_STOPPED}
    assert str(PreemptionReason.LOCAL_QUEUE_STOPPED) == "LocalQueueStopped"  # Kueue's reason


def test_running_queues_names_the_local_queue_and_cluster_queue_not_stopped() -> None:
    e = engine_with_flavors("h100")
    spec = ClusterQueue("a", gpu_group(("h100", 8, None, None)))
    queue(e, spec)
    assert e.running_queues("a/q") == {"LocalQueue", "ClusterQueue"}
    assert e.running_queues("a/missing") == frozenset()
    e.upsert_local_queue(LocalQueue("a", "q", "a", stop_policy=StopPolicy.HOLD))
    assert e.running_queues("a/q") == {"ClusterQueue"}
    e.upsert_cluster_queue(ClusterQueue("a", spec.resource_groups, stop_policy=StopPolicy.HOLD))
    assert e.running_queues("a/q") == frozenset()
    e.upsert_local_queue(LocalQueue("a", "q", "a"))
    assert e.running_queues("a/q") == {"LocalQueue"}
