"""The cycle's work follows what changed: parked look-alikes are woken, judged and parked as one."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue, Engine, Preemption, WithinClusterQueuePolicy

from .builders import engine_with_flavors, gpu_group, gpus, queue
from .test_examples import admitted, pending


def counts(e: Engine, cq: str) -> tuple[int, int]:
    status = e.cluster_queue_status(cq)
    return status.pending_active, status.pending_inadmissible


def five_gpus_full_and_six_waiting(**cq_options: object) -> Engine:
    """ClusterQueue a (5 GPUs) runs 3 + 2 GPUs; w0..w5 (2 GPUs each) wait, parked."""
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 5, None, None)), **cq_options))  # type: ignore[arg-type]
    e.add_workload(gpus("a", "three", 3))
    e.add_workload(gpus("a", "two", 2, created=1))
    assert admitted(e.run_cycle()) == ["a/three", "a/two"]
    for i in range(6):
        e.add_workload(gpus("a", f"w{i}", 2, created=10 + i))
    assert counts(e, "a") == (6, 0)
    first = e.run_cycle()
    # Every workload's first verdict is its own.
    assert set(pending(first)) == {f"a/w{i}" for i in range(6)}
    assert counts(e, "a") == (0, 6)
    return e


def test_a_woken_group_is_judged_in_line_until_one_does_not_fit() -> None:
    e = five_gpus_full_and_six_waiting()
    e.finish_workload("a/three")  # 3 GPUs free: room for one 2-GPU look-alike
    decisions = e.run_cycle()
    assert admitted(decisions) == ["a/w0"]
    # w1 was judged (and told the new numbers); w2..w5 would fail exactly as w1 did, so they
    # were parked again unjudged (no decision, nothing written) and show w1's verdict, the one
    # they would get, not the older numbers they were last told.
    assert pending(decisions) == {
        "a/w1": "needs 2 nvidia.com/gpu in flavor h100; ClusterQueue a has 1 of 5 free"
    }
    for i in range(2, 6):
        reason = e.workload(f"a/w{i}").pending_reason  # type: ignore[union-attr]
        assert reason == "needs 2 nvidia.com/gpu in flavor h100; ClusterQueue a has 1 of 5 free"
    assert counts(e, "a") == (0, 5)
    # Nothing changed since: nothing is looked at.
    assert e.run_cycle() == []


def test_a_new_look_alike_of_a_parked_group_joins_it_unjudged() -> None:
    e = five_gpus_full_and_six_waiting()
    e.add_workload(gpus("a", "w6", 2, created=20))
    e.add_workload(gpus("a", "bigger", 4, created=21))
    assert counts(e, "a") == (1, 7)
    # Only the workload of a new shape is judged.
    assert list(pending(e.run_cycle())) == ["a/bigger"]
    e.finish_workload("a/three")
    e.finish_workload("a/two")
    # The joined look-alikes keep their place in line: w0 and w1 fit (4 of 5 GPUs), then
    # neither w2 nor "bigger" does.
    assert admitted(e.run_cycle()) == ["a/w0", "a/w1"]


def test_when_age_decides_victims_a_newcomer_is_judged_on_its_own() -> None:
    newer_equal = Preemption(within_cluster_queue=WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)
    e = five_gpus_full_and_six_waiting(preemption=newer_equal)
    e.add_workload(gpus("a", "w6", 2, created=20))
    assert counts(e, "a") == (1, 6)
    assert "a/w6" in pending(e.run_cycle())


def test_an_unchanged_queue_spec_wakes_nobody_a_changed_one_wakes_all() -> None:
    e = five_gpus_full_and_six_waiting()
    spec = ClusterQueue("a", gpu_group(("h100", 5, None, None)))
    e.upsert_cluster_queue(spec)  # the operator re-sends it after each status write
    assert counts(e, "a") == (0, 6)
    e.upsert_cluster_queue(ClusterQueue("a", gpu_group(("h100", 7, None, None))))
    assert counts(e, "a") == (6, 0)
    assert admitted(e.run_cycle()) == ["a/w0"]
    assert counts(e, "a") == (0, 5)
