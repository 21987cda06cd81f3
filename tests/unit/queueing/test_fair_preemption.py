"""Fair-sharing preemption through the engine's cycle, with Kueue's facts (preemption_fair_test.go).

The conformance suite asks the preemptor directly with a given flavor assignment; these run a
whole cycle, so the flavor assigner must let a borrowing queue preempt under fair sharing (Kueue's
canPreemptWhileBorrowing) and the engine must pass the fair-sharing settings down.
"""

from __future__ import annotations

import pytest

from rayquota.queueing import ClusterQueue, Engine, Preempt
from rayquota.queueing.decisions import PreemptionReason
from rayquota.queueing.quota.fairsharing import (
    FairSharing,
    PreemptionStrategy,
    Share,
    ShareMeter,
    compare_shares,
)

from .builders import RECLAIM, engine_with_flavors, gpu_group, gpus, queue

FAIR = PreemptionReason.FAIR_SHARING
OWN = PreemptionReason.IN_CLUSTER_QUEUE


def _cohort(fair: bool | FairSharing, weights: dict[str, float] | None = None) -> Engine:
    """Queues a, b and c of 3 GPUs each in one cohort, Kueue's baseline policies."""
    e = engine_with_flavors("h100", fair_sharing=fair)
    for name in "abc":
        weight = (weights or {}).get(name, 1.0)
        quota = gpu_group(("h100", 3, None, None))
        spec = ClusterQueue(name, quota, cohort="all", preemption=RECLAIM, fair_sharing_weight=weight)
        queue(e, spec)
    return e


def _admit(e: Engine, *workloads: tuple[str, str, int, int]) -> None:
    """(queue, name, GPUs, priority), admitted one per cycle in this order (the last is newest)."""
    for index, (ns, name, count, priority) in enumerate(workloads):
        e.add_workload(gpus(ns, name, count, priority=priority, created=index))
        e.run_cycle()
        status = e.workload(f"{ns}/{name}")
        assert status is not None and status.phase.value == "Admitted", f"{ns}/{name} was not admitted"


def _preemption(e: Engine, ns: str, count: int) -> dict[str, PreemptionReason]:
    e.add_workload(gpus(ns, "in", count, created=100))
    found = [d for d in e.run_cycle() if isinstance(d, Preempt)]
    assert len(found) <= 1
    return dict(found[0].victim_kinds) if found else {}


def test_a_borrowing_preemptor_takes_its_own_low_priority_and_the_largest_share() -> None:
    # Kueue: "preempt from target and others even if over nominal" (preemption_fair_test.go:270)
    e = _cohort(True)
    _admit(e, ("a", "a2_low", 1, -1), ("a", "a1_low", 2, -1), ("b", "b1", 3, 0), ("b", "b2", 3, 0))
    assert _preemption(e, "a", 4) == {"a/a1_low": OWN, "b/b2": FAIR}


def test_a_heavier_queue_preempts_more() -> None:
    # Kueue: "CQ with higher weight can preempt more" (preemption_fair_test.go:379)
    e = _cohort(True, {"a": 2.0})
    _admit(e, *[("a", f"a{i}", 1, 0) for i in range(3)], *[("b", f"b{i}", 1, 0) for i in range(6)])
    assert _preemption(e, "a", 2) == {"b/b5": FAIR, "b/b4": FAIR}


def test_without_the_weight_the_same_preemption_is_refused() -> None:
    e = _cohort(True)
    _admit(e, *[("a", f"a{i}", 1, 0) for i in range(3)], *[("b", f"b{i}", 1, 0) for i in range(6)])
    assert _preemption(e, "a", 2) == {}


@pytest.mark.parametrize(
    ("strategies", "victim"),
    [
        # Kueue: "preempt lower priority first, even if big" (:355)
        ([PreemptionStrategy.LESS_THAN_INITIAL_SHARE], "b/b_low"),
        # Kueue: "preempt workload that doesn't transfer the imbalance, even if high priority" (:367)
        ([PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE], "b/b_high"),
    ],
)
def test_the_configured_strategy_decides_the_victim(
    strategies: list[PreemptionStrategy], victim: str
) -> None:
    e = _cohort(FairSharing(tuple(strategies)))
    _admit(e, ("a", "a1", 3, 0), ("b", "b_low", 5, 0), ("b", "b_high", 1, 1))
    assert _preemption(e, "a", 1) == {victim: FAIR}


def test_strategies_are_read_and_checked_as_kueue_does() -> None:
    assert FairSharing.parse(None) == FairSharing()
    assert FairSharing.parse(["LessThanInitialShare"]).preemption_strategies == (
        PreemptionStrategy.LESS_THAN_INITIAL_SHARE,
    )
    with pytest.raises(ValueError, match=r"fairSharing.preemptionStrategies: unknown strategy 'Smaller'"):
        FairSharing.parse(["Smaller"])
    with pytest.raises(ValueError, match=r"'LessThanInitialShare,LessThanOrEqualToFinalShare' is not one of"):
        FairSharing.parse(["LessThanInitialShare", "LessThanOrEqualToFinalShare"])
    with pytest.raises(ValueError, match=r"'\(empty\)' is not one of"):
        FairSharing.parse([])


def test_a_zero_weight_borrower_has_the_largest_share() -> None:
    e = _cohort(True, {"b": 0.0})
    _admit(e, ("b", "b0", 4, 0), ("a", "a0", 4, 0))
    meter = ShareMeter()
    nodes = e._accounting.tree.cluster_queues
    b, a = meter.share(nodes["b"]), meter.share(nodes["a"])
    assert b.zero_weight_borrows and b.weighted() == float("inf")
    assert compare_shares(b, a) == 1 and compare_shares(a, b) == -1
    assert compare_shares(Share(0.0, 0.0, False), a) == -1  # weight 0, not borrowing: share 0
