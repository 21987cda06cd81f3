"""Inside a cohort tree, a cycle's borrowers go by how far up they must borrow, then priority
(Kueue's scheduler: the assignment's borrowing level sorts before priority, issue 29 cause 6),
and Kueue's measure of that level and of reclaiming in a hierarchy."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue, Cohort, Engine, FlavorQuotas, ResourceGroup, ResourceQuota
from rayquota.queueing.quota.cohorts import QuotaNode, borrowing_level, may_reclaim_in_hierarchy

from .builders import GPU, engine_with_flavors, gpu_group, gpus, queue
from .test_examples import admitted

FR = ("h100", GPU)


def _cohort(name: str, parent: str | None, gpus_owned: int) -> Cohort:
    groups = (ResourceGroup((GPU,), (FlavorQuotas("h100", {GPU: ResourceQuota.of(gpus_owned)}),)),)
    return Cohort(name, parent, groups if gpus_owned else ())


def two_level_tree() -> Engine:
    """root (2 GPUs of its own) <- team (2 of its own) <- queues a and b (none)."""
    e = engine_with_flavors("h100")
    e.upsert_cohort(_cohort("root", None, 2))
    e.upsert_cohort(_cohort("team", "root", 2))
    for name in ("a", "b"):
        queue(e, ClusterQueue(name, gpu_group(("h100", 0, None, None)), cohort="team"))
    return e


def node(e: Engine, name: str) -> QuotaNode:
    return e._accounting.queues[name].node


def test_borrowing_level_is_the_height_of_the_lowest_subtree_that_covers_the_request() -> None:
    e = two_level_tree()
    assert borrowing_level(node(e, "a"), FR, 0) == 0
    assert borrowing_level(node(e, "a"), FR, 2000) == 1  # team's own 2 suffice
    assert borrowing_level(node(e, "a"), FR, 4000) == 2  # root's are needed too
    assert borrowing_level(node(e, "a"), FR, 6000) == 2  # nowhere: the whole tree's height
    assert may_reclaim_in_hierarchy(node(e, "a"), FR, 2000)  # team is below the root
    assert not may_reclaim_in_hierarchy(node(e, "a"), FR, 4000)


def test_a_borrower_from_the_parent_goes_before_a_higher_priority_one_from_the_grandparent() -> None:
    e = two_level_tree()
    e.add_workload(gpus("a", "near", 2, priority=1, created=0))
    e.add_workload(gpus("b", "far", 4, priority=5, created=1))
    # Kueue sorts the cycle's heads by borrowing level first: "near" takes team's 2 GPUs, and
    # "far", which would need the grandparent's too, no longer fits.
    assert admitted(e.run_cycle()) == ["a/near"]
