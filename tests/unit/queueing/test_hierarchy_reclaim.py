"""Reclaiming in a cohort tree through full cycles (issue 29 cause 7): a queue whose branch of
the tree owns quota another branch borrows takes it back, as Kueue's hierarchical preemption
does (preemption_hierarchical_test.go "preempt with hierarchical advantage")."""

from __future__ import annotations

import pytest

from rayquota.queueing import (
    ClusterQueue,
    Cohort,
    Engine,
    FlavorQuotas,
    Preemption,
    PreemptionReason,
    ReclaimWithinCohortPolicy,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueuePolicy,
)

from .builders import GPU, engine_with_flavors, gpu_group, gpus, queue
from .test_examples import admitted, preempts


def branch_tree(within: WithinClusterQueuePolicy) -> Engine:
    """root <- team (2 GPUs of its own) <- mine (none); root <- other (none): other can only
    borrow team's 2."""
    e = engine_with_flavors("h100")
    e.upsert_cohort(Cohort("root"))
    team_quota = (ResourceGroup((GPU,), (FlavorQuotas("h100", {GPU: ResourceQuota.of(2)}),)),)
    e.upsert_cohort(Cohort("team", "root", team_quota))
    policy = Preemption(within_cluster_queue=within, reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY)
    queue(e, ClusterQueue("mine", gpu_group(("h100", 0, None, None)), cohort="team", preemption=policy))
    queue(e, ClusterQueue("other", gpu_group(("h100", 0, None, None)), cohort="root"))
    return e


@pytest.mark.parametrize("within", [WithinClusterQueuePolicy.LOWER_PRIORITY, WithinClusterQueuePolicy.NEVER])
def test_a_branch_reclaims_its_quota_from_another_branch(within: WithinClusterQueuePolicy) -> None:
    e = branch_tree(within)
    e.add_workload(gpus("other", "borrowed", 2, priority=10))
    assert admitted(e.run_cycle()) == ["other/borrowed"]
    # Same quota, lower priority than the victim: team's 2 GPUs are mine's branch's to take back.
    e.add_workload(gpus("mine", "owner", 2, priority=0, created=1))
    (preempt,) = preempts(e.run_cycle())
    assert preempt.victims == ("other/borrowed",)
    assert preempt.victim_kinds == {"other/borrowed": PreemptionReason.RECLAIM_WITHIN_COHORT}
    e.release("other/borrowed")
    assert admitted(e.run_cycle()) == ["mine/owner"]
