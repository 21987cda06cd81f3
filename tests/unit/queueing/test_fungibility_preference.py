"""Kueue v1beta2's ``flavorFungibility.preference``: which flavor wins when none fits without
borrowing or preemption (pkg/scheduler/flavorassigner/flavorassigner.go ``isPreferred``)."""

from __future__ import annotations

import pytest

from rayquota.queueing import (
    Admit,
    ClusterQueue,
    Engine,
    FlavorFungibility,
    FlavorFungibilityPreference,
    Preempt,
    Preemption,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)
from rayquota.queueing.flavors.assignment import _FIT_RANK, Possibility, _FlavorFit
from tests.unit.queueing.builders import engine_with_flavors, gpu_group, gpus, queue

TRY_NEXT = (WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.TRY_NEXT_FLAVOR)
BORROWING = FlavorFungibilityPreference.BORROWING_OVER_PREEMPTION
PREEMPTION = FlavorFungibilityPreference.PREEMPTION_OVER_BORROWING


def _engine(preference: FlavorFungibilityPreference | None) -> Engine:
    """Queue ``a``: flavor ``on-demand`` (4 GPUs, full of its own low-priority work), then ``spot``
    (no quota of its own; the cohort's lender has 4 free). A high-priority 4-GPU workload can be
    had either by preempting on ``on-demand`` or by borrowing ``spot``."""
    e = engine_with_flavors("on-demand", "spot")
    queue(
        e,
        ClusterQueue(
            "a",
            gpu_group(("on-demand", 4, None, None), ("spot", 0, None, None)),
            cohort="c",
            preemption=Preemption(WithinClusterQueuePolicy.LOWER_PRIORITY),
            flavor_fungibility=FlavorFungibility(*TRY_NEXT, preference),
        ),
    )
    queue(e, ClusterQueue("lender", gpu_group(("spot", 4, None, None)), cohort="c"))
    e.add_workload(gpus("a", "low", 4, priority=0, created=1.0))
    (admit,) = [d for d in e.run_cycle() if isinstance(d, Admit)]
    assert admit.pod_sets[0].flavors["nvidia.com/gpu"] == "on-demand"
    e.add_workload(gpus("a", "high", 4, priority=100, created=2.0))
    return e


@pytest.mark.parametrize("preference", [None, BORROWING])
def test_borrowing_over_preemption_borrows_the_next_flavor(
    preference: FlavorFungibilityPreference | None,
) -> None:
    decisions = _engine(preference).run_cycle()
    assert not [d for d in decisions if isinstance(d, Preempt)]
    (admit,) = [d for d in decisions if isinstance(d, Admit)]
    assert admit.workload == "a/high" and admit.pod_sets[0].flavors["nvidia.com/gpu"] == "spot"
    assert admit.borrowing


def test_preemption_over_borrowing_preempts_within_nominal() -> None:
    decisions = _engine(PREEMPTION).run_cycle()
    assert not [d for d in decisions if isinstance(d, Admit)]
    (preempt,) = [d for d in decisions if isinstance(d, Preempt)]
    assert preempt.preemptor == "a/high" and list(preempt.victims) == ["a/low"]


def test_rank_orders() -> None:
    fit, borrow = _FlavorFit(_FIT_RANK), _FlavorFit(_FIT_RANK, borrowing=True)
    preempt_nominal = _FlavorFit(Possibility.PREEMPT)
    preempt_borrowing = _FlavorFit(Possibility.PREEMPT, borrowing=True)
    no_fit = _FlavorFit(0)
    for preference in (None, BORROWING, PREEMPTION):
        assert not no_fit.better_than(preempt_borrowing, preference)
        assert fit.better_than(borrow, preference) and not borrow.better_than(fit, preference)
        assert not preempt_nominal.better_than(_FlavorFit(Possibility.PREEMPT), preference)  # first of equals
    # No preference or BorrowingOverPreemption: no preemption first, then no borrowing.
    for preference in (None, BORROWING):
        assert borrow.better_than(preempt_nominal, preference)
        assert preempt_nominal.better_than(preempt_borrowing, preference)
    # PreemptionOverBorrowing: no borrowing first, then no preemption.
    assert preempt_nominal.better_than(borrow, PREEMPTION)
    assert borrow.better_than(preempt_borrowing, PREEMPTION)
