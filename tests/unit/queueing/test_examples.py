"""Readable examples of the engine's rules, one behaviour per test."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rayquota.queueing import (
    Admit,
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Engine,
    FlavorFungibility,
    LocalQueue,
    Pending,
    PodSet,
    PodSetAssignment,
    Preempt,
    Preemption,
    PreemptionReason,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    ResourceFlavor,
    StopPolicy,
    Taint,
    Toleration,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
)

from .builders import GPU, engine_with_flavors, gpu_group, gpus, queue, used


def admitted(decisions: list) -> list[str]:
    return [d.workload for d in decisions if isinstance(d, Admit)]


def pending(decisions: list) -> dict[str, str]:
    return {d.workload: d.reason for d in decisions if isinstance(d, Pending)}


def preempts(decisions: list) -> list[Preempt]:
    return [d for d in decisions if isinstance(d, Preempt)]


# ---------------------------------------------------------------- fitting and reasons


def test_pending_reason_says_what_is_missing() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("team-a", gpu_group(("h100", 16, None, None)), cohort="research"))
    queue(e, ClusterQueue("team-b", gpu_group(("h100", 8, None, None)), cohort="research"))
    e.add_workload(gpus("team-a", "running", 12))
    e.add_workload(gpus("team-a", "big", 16, created=1))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["team-a/running"]
    assert pending(decisions)["team-a/big"] == (
        "needs 16 nvidia.com/gpu in flavor h100; "
        "ClusterQueue team-a has 4 of 16 free; cohort research can lend 8"
    )


def test_one_cycle_admits_everything_that_fits() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 10, None, None))))
    for i in range(10):
        e.add_workload(gpus("a", f"w{i}", 1, created=i))
    e.add_workload(gpus("a", "w10", 1, created=10))
    decisions = e.run_cycle()
    assert admitted(decisions) == [f"a/w{i}" for i in range(10)]
    assert "a/w10" in pending(decisions)
    assert used(e, "a") == 10


def test_priority_first_then_fifo() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 2, None, None))))
    e.add_workload(gpus("a", "old-low", 1, priority=1, created=0))
    e.add_workload(gpus("a", "new-high", 1, priority=5, created=2))
    e.add_workload(gpus("a", "mid-high", 1, priority=5, created=1))
    assert admitted(e.run_cycle()) == ["a/mid-high", "a/new-high"]


def test_strict_fifo_blocks_behind_head_best_effort_does_not() -> None:
    for strategy, expected in (
        (QueueingStrategy.STRICT_FIFO, []),
        (QueueingStrategy.BEST_EFFORT_FIFO, ["a/small"]),
    ):
        e = engine_with_flavors("h100")
        queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None)), queueing_strategy=strategy))
        e.add_workload(gpus("a", "head", 8, created=0))
        e.add_workload(gpus("a", "small", 2, created=1))
        decisions = e.run_cycle()
        assert admitted(decisions) == expected
        if strategy is QueueingStrategy.STRICT_FIFO:
            assert (
                pending(decisions)["a/small"]
                == "waiting behind a/head at the head of StrictFIFO ClusterQueue a"
            )


def test_parked_workloads_wait_for_capacity_changes_only() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None))))
    e.add_workload(gpus("a", "running", 4))
    e.add_workload(gpus("a", "waiting", 2, created=1))
    e.run_cycle()
    # Nothing changed: the parked workload is not looked at, so no decision at all.
    assert e.run_cycle() == []
    e.add_workload(gpus("a", "other", 5, created=2))  # an arrival is not a capacity change
    assert list(pending(e.run_cycle())) == ["a/other"]
    e.finish_workload("a/running")
    assert admitted(e.run_cycle()) == ["a/waiting"]


def test_nothing_fits_beyond_borrowing_limit() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, 2, None)), cohort="c"))
    queue(e, ClusterQueue("b", gpu_group(("h100", 10, None, None)), cohort="c"))
    e.add_workload(gpus("a", "seven", 7))
    e.add_workload(gpus("a", "six", 6, created=1))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["a/six"]
    assert "(borrowing limit 2)" in pending(decisions)["a/seven"]
    assert [d.borrowing for d in decisions if isinstance(d, Admit)] == [True]


def test_lending_limit_keeps_part_of_the_quota_home() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("lender", gpu_group(("h100", 10, None, 3)), cohort="c"))
    queue(e, ClusterQueue("borrower", gpu_group(("h100", 2, None, None)), cohort="c"))
    e.add_workload(gpus("borrower", "six", 6))
    e.add_workload(gpus("borrower", "five", 5, created=1))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["borrower/five"]
    assert e.available("lender", "h100", GPU) == 7000  # its 7 guaranteed GPUs stay free for it


def test_parent_cohort_quota_is_lent_down_the_tree() -> None:
    e = engine_with_flavors("h100")
    e.upsert_cohort(Cohort("org", resource_groups=gpu_group(("h100", 6, None, None))))
    e.upsert_cohort(Cohort("dept", parent="org"))
    queue(e, ClusterQueue("a", gpu_group(("h100", 2, None, None)), cohort="dept"))
    e.add_workload(gpus("a", "eight", 8))
    e.add_workload(gpus("a", "one", 1, created=1))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["a/eight"]
    assert "cohort dept can lend 0" in pending(decisions)["a/one"]


def test_cohort_cycle_disables_members_and_recovers() -> None:
    e = engine_with_flavors("h100")
    e.upsert_cohort(Cohort("x", parent="y"))
    e.upsert_cohort(Cohort("y", parent="x"))
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None)), cohort="x"))
    e.add_workload(gpus("a", "w", 1))
    decisions = e.run_cycle()
    assert admitted(decisions) == []
    assert pending(decisions)["a/w"] == "ClusterQueue a is inactive: cohort cycle x -> y -> x"
    assert e.cohort_cycles() == [["x", "y"]]
    assert e.cluster_queue_status("a").disabled_reason is not None
    e.upsert_cohort(Cohort("y"))
    assert admitted(e.run_cycle()) == ["a/w"]


def test_node_selector_and_taints_pick_the_flavor() -> None:
    e = Engine()
    e.upsert_flavor(ResourceFlavor("spot", {"pool": "spot"}, (Taint("spot", "true", "NoSchedule"),)))
    e.upsert_flavor(ResourceFlavor("a100", {"pool": "a100"}))
    e.upsert_flavor(ResourceFlavor("h100", {"pool": "h100"}))
    queue(
        e,
        ClusterQueue(
            "a", gpu_group(("spot", 8, None, None), ("a100", 8, None, None), ("h100", 8, None, None))
        ),
    )
    e.add_workload(gpus("a", "plain", 1))
    e.add_workload(gpus("a", "tolerant", 1, created=1, tolerations=(Toleration("spot", "Exists"),)))
    e.add_workload(gpus("a", "picky", 1, created=2, node_selector={"pool": "h100"}))
    flavors = {d.workload: d.pod_sets[0].flavors[GPU] for d in e.run_cycle() if isinstance(d, Admit)}
    assert flavors == {"a/plain": "a100", "a/tolerant": "spot", "a/picky": "h100"}


def test_uncovered_resource_is_explained() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.add_workload(Workload("a", "w", "q", (PodSet.of("p", 1, {"cpu": "2"}),)))
    assert pending(e.run_cycle())["a/w"] == "resource cpu is not covered by ClusterQueue a"


def test_missing_local_queue_is_explained_and_routed_later() -> None:
    e = engine_with_flavors("h100")
    e.upsert_cluster_queue(ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.add_workload(gpus("a", "w", 1))
    assert pending(e.run_cycle())["a/w"] == "LocalQueue a/q does not exist"
    e.upsert_local_queue(LocalQueue("a", "q", "a"))
    assert admitted(e.run_cycle()) == ["a/w"]


# ---------------------------------------------------------------- fungibility


def _two_flavor_engine(fungibility: FlavorFungibility, preemption: Preemption | None = None) -> Engine:
    e = engine_with_flavors("a100", "h100")
    groups = gpu_group(("a100", 4, None, None), ("h100", 8, None, None))
    queue(
        e,
        ClusterQueue(
            "a", groups, cohort="c", flavor_fungibility=fungibility, preemption=preemption or Preemption()
        ),
    )
    queue(e, ClusterQueue("lender", gpu_group(("a100", 8, None, None)), cohort="c"))
    return e


def test_when_can_borrow_borrow_stays_on_first_flavor() -> None:
    e = _two_flavor_engine(FlavorFungibility(WhenCanBorrow.BORROW))
    e.add_workload(gpus("a", "w", 6))
    (admit,) = [d for d in e.run_cycle() if isinstance(d, Admit)]
    assert admit.pod_sets[0].flavors[GPU] == "a100" and admit.borrowing


def test_when_can_borrow_try_next_flavor_prefers_nominal_elsewhere() -> None:
    e = _two_flavor_engine(FlavorFungibility(WhenCanBorrow.TRY_NEXT_FLAVOR))
    e.add_workload(gpus("a", "w", 6))
    (admit,) = [d for d in e.run_cycle() if isinstance(d, Admit)]
    assert admit.pod_sets[0].flavors[GPU] == "h100" and not admit.borrowing


def test_when_can_preempt_choices() -> None:
    policy = Preemption(WithinClusterQueuePolicy.LOWER_PRIORITY)
    for when, expect_preempt in ((WhenCanPreempt.PREEMPT, True), (WhenCanPreempt.TRY_NEXT_FLAVOR, False)):
        e = engine_with_flavors("a100", "h100")
        groups = gpu_group(("a100", 4, None, None), ("h100", 8, None, None))
        queue(
            e,
            ClusterQueue(
                "a", groups, flavor_fungibility=FlavorFungibility(when_can_preempt=when), preemption=policy
            ),
        )
        e.add_workload(gpus("a", "low", 4, priority=0))
        e.run_cycle()
        e.add_workload(gpus("a", "high", 4, priority=10, created=1))
        decisions = e.run_cycle()
        if expect_preempt:
            assert [p.victims for p in preempts(decisions)] == [("a/low",)]
        else:
            assert preempts(decisions) == []
            (admit,) = [d for d in decisions if isinstance(d, Admit)]
            assert admit.pod_sets[0].flavors[GPU] == "h100"


# ---------------------------------------------------------------- preemption


def _within(policy: WithinClusterQueuePolicy) -> Engine:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None)), preemption=Preemption(policy)))
    return e


def test_within_cluster_queue_lower_priority_takes_minimal_newest_victims() -> None:
    e = _within(WithinClusterQueuePolicy.LOWER_PRIORITY)
    for i, (prio, size) in enumerate([(1, 2), (1, 2), (0, 2), (5, 2)]):
        e.add_workload(gpus("a", f"w{i}", size, priority=prio, created=i))
    e.run_cycle()
    e.add_workload(gpus("a", "urgent", 4, priority=3, created=9))
    decisions = e.run_cycle()
    (p,) = preempts(decisions)
    # Lowest priority first (w2), then the most recently admitted of priority 1 (w1).
    assert sorted(p.victims) == ["a/w1", "a/w2"]
    assert p.preemptor == "a/urgent" and "a/urgent" not in p.victims
    # Quota stays held until the operator says the pods are gone.
    assert used(e, "a") == 8
    assert admitted(e.run_cycle()) == []
    for victim in p.victims:
        e.release(victim)
    assert admitted(e.run_cycle()) == ["a/urgent"]
    assert e.workload("a/w1").phase == "Pending"  # requeued


def test_within_cluster_queue_never_and_equal_priority() -> None:
    e = _within(WithinClusterQueuePolicy.NEVER)
    e.add_workload(gpus("a", "low", 8))
    e.run_cycle()
    e.add_workload(gpus("a", "high", 8, priority=9, created=1))
    assert preempts(e.run_cycle()) == []

    for policy, expect in (
        (WithinClusterQueuePolicy.LOWER_PRIORITY, []),
        (WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, [("a/newer",)]),
    ):
        e = _within(policy)
        e.add_workload(gpus("a", "newer", 8, priority=1, created=5))
        e.run_cycle()
        e.add_workload(gpus("a", "older", 8, priority=1, created=1))
        assert [p.victims for p in preempts(e.run_cycle())] == expect


def test_never_preempts_when_it_fits() -> None:
    e = _within(WithinClusterQueuePolicy.LOWER_PRIORITY)
    e.add_workload(gpus("a", "low", 4))
    e.run_cycle()
    e.add_workload(gpus("a", "high", 4, priority=9, created=1))
    decisions = e.run_cycle()
    assert preempts(decisions) == [] and admitted(decisions) == ["a/high"]


def _cohort_pair(reclaim: ReclaimWithinCohortPolicy, borrow: BorrowWithinCohort | None = None) -> Engine:
    e = engine_with_flavors("h100")
    policy = Preemption(WithinClusterQueuePolicy.NEVER, reclaim, borrow or BorrowWithinCohort())
    queue(e, ClusterQueue("owner", gpu_group(("h100", 8, None, None)), cohort="c", preemption=policy))
    queue(e, ClusterQueue("borrower", gpu_group(("h100", 2, None, None)), cohort="c", preemption=policy))
    return e


@pytest.mark.parametrize(
    ("reclaim", "borrower_priority", "reclaims"),
    [
        (ReclaimWithinCohortPolicy.NEVER, 0, False),
        (ReclaimWithinCohortPolicy.LOWER_PRIORITY, 0, True),
        (ReclaimWithinCohortPolicy.LOWER_PRIORITY, 9, False),
        (ReclaimWithinCohortPolicy.ANY, 9, True),
    ],
)
def test_reclaim_within_cohort(
    reclaim: ReclaimWithinCohortPolicy, borrower_priority: int, reclaims: bool
) -> None:
    e = _cohort_pair(reclaim)
    e.add_workload(gpus("borrower", "home", 2, priority=borrower_priority))
    e.add_workload(gpus("borrower", "lent", 6, priority=borrower_priority, created=1))
    assert admitted(e.run_cycle()) == ["borrower/home", "borrower/lent"]
    e.add_workload(gpus("owner", "mine", 6, priority=5, created=2))
    decisions = e.run_cycle()
    # Only the borrowed workload is a candidate; the one within nominal quota never is.
    assert [p.victims for p in preempts(decisions)] == ([("borrower/lent",)] if reclaims else [])


def test_borrow_within_cohort_respects_threshold() -> None:
    for threshold, expect in ((3, [("borrower/lent",)]), (0, [])):
        e = engine_with_flavors("h100")
        # borrowWithinCohort needs a reclaimWithinCohort other than Never (the API refuses the
        # pair, as Kueue's does; Kueue's preemptor looks at other queues only when reclaiming).
        borrow = Preemption(
            reclaim_within_cohort=ReclaimWithinCohortPolicy.LOWER_PRIORITY,
            borrow_within_cohort=BorrowWithinCohort(BorrowWithinCohortPolicy.LOWER_PRIORITY, threshold),
        )
        queue(e, ClusterQueue("a", gpu_group(("h100", 2, None, None)), cohort="c", preemption=borrow))
        queue(e, ClusterQueue("borrower", gpu_group(("h100", 2, None, None)), cohort="c"))
        queue(e, ClusterQueue("lender", gpu_group(("h100", 6, None, None)), cohort="c"))
        e.add_workload(gpus("borrower", "lent", 8, priority=2))
        e.run_cycle()
        # "a" needs 4: more than its nominal 2, so it must borrow while preempting.
        e.add_workload(gpus("a", "w", 4, priority=5, created=1))
        assert [p.victims for p in preempts(e.run_cycle())] == expect


# ---------------------------------------------------------------- slices


def test_scale_up_slice_needs_only_the_delta_and_replaces_atomically() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 10, None, None))))
    e.add_workload(gpus("a", "job-s1", 6))
    e.run_cycle()
    # 8 pods would not fit next to the 6 held, but only 2 more are needed.
    e.add_workload(gpus("a", "job-s2", 8, created=1, replaces="a/job-s1"))
    (admit,) = e.run_cycle()
    assert isinstance(admit, Admit) and admit.replaces == "a/job-s1" and admit.workload == "a/job-s2"
    assert used(e, "a") == 8
    assert e.workload("a/job-s1") is None


def test_slice_with_same_pod_set_name_but_bigger_pods_is_counted_by_totals() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 12, None, None))))
    e.add_workload(gpus("a", "svc-old", 4, per_pod=1))
    e.run_cycle()
    # Same worker group name, each pod now needs 2 GPUs: 8 in all, 4 more than held.
    e.add_workload(gpus("a", "svc-new", 4, per_pod=2, created=1, replaces="a/svc-old"))
    (admit,) = e.run_cycle()
    assert isinstance(admit, Admit)
    assert dict(admit.usage) == {("h100", GPU): 8000}
    assert used(e, "a") == 8
    # Too big a jump does not fit: 4 pods x 4 GPUs = 16 > 12.
    e.add_workload(gpus("a", "svc-huge", 4, per_pod=4, created=2, replaces="a/svc-new"))
    assert "needs 8 more nvidia.com/gpu" in pending(e.run_cycle())["a/svc-huge"]
    assert used(e, "a") == 8


def test_scale_down_applies_at_once_and_scale_up_in_place_is_refused() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.add_workload(gpus("a", "w", 8))
    e.add_workload(gpus("a", "next", 3, created=1))
    e.run_cycle()
    e.update_workload(gpus("a", "w", 5))
    assert used(e, "a") == 5
    assert admitted(e.run_cycle()) == ["a/next"]
    with pytest.raises(ValueError, match="replacement slice"):
        e.update_workload(gpus("a", "w", 6))


# ---------------------------------------------------------------- fair sharing, stop policy, restore


def test_fair_sharing_orders_by_weighted_share() -> None:
    e = engine_with_flavors("h100", fair_sharing=True)
    queue(e, ClusterQueue("heavy", gpu_group(("h100", 2, None, None)), cohort="c"))
    queue(e, ClusterQueue("light", gpu_group(("h100", 2, None, None)), cohort="c"))
    queue(e, ClusterQueue("idle", gpu_group(("h100", 8, None, None)), cohort="c"))
    e.add_workload(gpus("heavy", "running", 6))
    e.run_cycle()
    # heavy already borrows 4; light borrows nothing, so light goes first despite being newer.
    e.add_workload(gpus("heavy", "more", 4, created=1))
    e.add_workload(gpus("light", "first", 4, created=2))
    assert admitted(e.run_cycle()) == ["light/first"]


def test_hold_and_drain_evicts_and_holds_quota_until_release() -> None:
    e = engine_with_flavors("h100")
    spec = ClusterQueue("a", gpu_group(("h100", 8, None, None)))
    queue(e, spec)
    e.add_workload(gpus("a", "w", 4))
    e.run_cycle()
    e.upsert_cluster_queue(ClusterQueue("a", spec.resource_groups, stop_policy=StopPolicy.HOLD_AND_DRAIN))
    e.add_workload(gpus("a", "new", 1, created=1))
    decisions = e.run_cycle()
    assert [p.victims for p in preempts(decisions)] == [("a/w",)]
    assert pending(decisions)["a/new"] == "ClusterQueue a is stopped (HoldAndDrain)"
    assert used(e, "a") == 4
    e.release("a/w")
    assert used(e, "a") == 0


def test_restore_admission_charges_recorded_usage() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.restore_admission(gpus("a", "w", 6), "a", [PodSetAssignment("workers", 6, {GPU: "h100"}, {GPU: 6000})])
    assert used(e, "a") == 6
    e.add_workload(gpus("a", "x", 4, created=1))
    assert admitted(e.run_cycle()) == []
    e.delete_workload("a/w")
    assert admitted(e.run_cycle()) == ["a/x"]


def test_fair_sharing_preempts_the_queue_with_the_larger_share() -> None:
    e = engine_with_flavors("h100", fair_sharing=True)
    reclaim = Preemption(reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY)
    queue(e, ClusterQueue("greedy", gpu_group(("h100", 2, None, None)), cohort="c", preemption=reclaim))
    queue(e, ClusterQueue("modest", gpu_group(("h100", 2, None, None)), cohort="c", preemption=reclaim))
    queue(e, ClusterQueue("owner", gpu_group(("h100", 6, None, None)), cohort="c", preemption=reclaim))
    e.add_workload(gpus("greedy", "g1", 3))
    e.add_workload(gpus("greedy", "g2", 2, created=1))
    e.add_workload(gpus("modest", "m1", 3, created=2))
    assert len(admitted(e.run_cycle())) == 3  # 8 of 10 GPUs in use; greedy borrows 3, modest 1
    e.add_workload(gpus("owner", "mine", 3, priority=5, created=3))
    (p,) = preempts(e.run_cycle())
    # 2 GPUs are free, so one more is needed: greedy has the larger share, and g2 (its newest)
    # frees enough on its own.
    assert p.victims == ("greedy/g2",)
    assert p.preemptor == "owner/mine"
    # owner stays within its nominal quota (3 of 6): as in Kueue, that is reclamation.
    assert p.victim_kinds == {"greedy/g2": PreemptionReason.RECLAIM_WITHIN_COHORT}


def test_local_queue_stop_and_namespace_selector() -> None:
    from rayquota.queueing import LabelSelector

    e = engine_with_flavors("h100")
    spec = ClusterQueue(
        "a", gpu_group(("h100", 8, None, None)), namespace_selector=LabelSelector({"team": "a"})
    )
    queue(e, spec)
    e.add_workload(gpus("a", "w", 1))
    assert pending(e.run_cycle())["a/w"] == "namespace a is not selected by ClusterQueue a"
    e.upsert_namespace("a", {"team": "a"})
    e.upsert_local_queue(LocalQueue("a", "q", "a", stop_policy=StopPolicy.HOLD))
    assert pending(e.run_cycle())["a/w"] == "LocalQueue a/q is stopped"
    e.upsert_local_queue(LocalQueue("a", "q", "a"))
    assert admitted(e.run_cycle()) == ["a/w"]


def test_finish_with_pods_still_running_holds_quota_until_release() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None))))
    e.add_workload(gpus("a", "done", 4))
    e.add_workload(gpus("a", "next", 4, created=1))
    e.run_cycle()
    e.finish_workload("a/done", pods_gone=False)
    assert admitted(e.run_cycle()) == []
    e.release("a/done")
    assert e.workload("a/done") is None
    assert admitted(e.run_cycle()) == ["a/next"]


def test_deactivating_an_admitted_workload_evicts_it() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None))))
    e.add_workload(gpus("a", "w", 4))
    e.run_cycle()
    spec = gpus("a", "w", 4)
    e.update_workload(Workload(spec.namespace, spec.name, spec.queue_name, spec.pod_sets, active=False))
    (p,) = preempts(e.run_cycle())
    assert p.victims == ("a/w",) and p.preemptor is None
    e.release("a/w")
    assert e.workload("a/w").phase == "Pending"
    decisions = e.run_cycle()
    assert admitted(decisions) == [] and used(e, "a") == 0
    assert pending(decisions) == {"a/w": "workload a/w is inactive"}


def test_deleted_cluster_queue_waits_for_its_admitted_workloads() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None))))
    e.add_workload(gpus("a", "running", 2))
    e.run_cycle()
    e.add_workload(gpus("a", "waiting", 1, created=1))
    e.delete_cluster_queue("a")
    assert pending(e.run_cycle())["a/waiting"] == "ClusterQueue a does not exist"
    assert used(e, "a") == 2
    e.finish_workload("a/running")
    assert "a" not in e.cluster_queue_names()


def test_terminating_cluster_queue_admits_nothing_and_keeps_its_usage_until_deleted() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None))))
    e.add_workload(gpus("a", "running", 2))
    e.add_workload(gpus("a", "parked", 4, created=1))  # does not fit beside running: parked
    e.run_cycle()
    e.terminate_cluster_queue("a")
    e.add_workload(gpus("a", "fits", 1, created=2))
    decisions = e.run_cycle()
    assert admitted(decisions) == []
    reasons = pending(decisions)
    assert (
        reasons["a/parked"]
        == reasons["a/fits"]
        == ("ClusterQueue a is being deleted (Terminating): it admits no new workloads")
    )
    assert used(e, "a") == 2 and e.cluster_queue_status("a").admitted == 1
    e.finish_workload("a/running")
    assert admitted(e.run_cycle()) == [] and e.cluster_queue_status("a").admitted == 0
    assert "a" in e.cluster_queue_names()  # until the object is gone
    e.delete_cluster_queue("a")
    assert "a" not in e.cluster_queue_names()
    assert pending(e.run_cycle()) == {
        "a/parked": "ClusterQueue a does not exist",
        "a/fits": "ClusterQueue a does not exist",
    }


def test_same_instant_workloads_queue_in_sequence_whatever_their_arrival() -> None:
    e = engine_with_flavors("h100")
    queue(
        e,
        ClusterQueue("a", gpu_group(("h100", 1, None, None)), queueing_strategy=QueueingStrategy.STRICT_FIFO),
    )
    e.add_workload(replace(gpus("a", "second", 1, created=5), sequence=12))
    e.add_workload(replace(gpus("a", "first", 1, created=5), sequence=11))
    e.add_workload(replace(gpus("a", "older", 1, created=4), sequence=90))
    assert admitted(e.run_cycle()) == ["a/older"]
    e.finish_workload("a/older")
    assert admitted(e.run_cycle()) == ["a/first"]


def test_priority_update_reorders_pending_workloads() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 1, None, None))))
    e.add_workload(gpus("a", "first", 1, created=0))
    e.add_workload(gpus("a", "second", 1, created=1))
    e.update_workload(gpus("a", "second", 1, created=1, priority=3))
    assert admitted(e.run_cycle()) == ["a/second"]


def test_slice_of_an_evicted_predecessor_gets_no_credit_and_the_predecessor_is_dropped() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 10, None, None))))
    e.add_workload(gpus("a", "s1", 4))
    e.run_cycle()
    e.evict("a/s1")
    e.add_workload(gpus("a", "s2", 6, created=1, replaces="a/s1"))
    (admit,) = [d for d in e.run_cycle() if isinstance(d, Admit)]
    # The evicted pods still hold their 4 GPUs; the slice needed all 6 of its own.
    assert admit.replaces is None and used(e, "a") == 10
    e.release("a/s1")
    assert e.workload("a/s1") is None and used(e, "a") == 6
