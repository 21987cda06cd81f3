"""Issue 29 cause 8: rayquota judges each workload of a cycle against the usage as it is at that
moment, where Kueue assigns flavors from the snapshot taken when the cycle starts and skips a
workload that no longer fits (it is retried, re-nominated, in the next cycle).

The setting is Kueue's scheduler_test.go:1304 ("cannot borrow if cohort was assigned and would
result in overadmission"): two queues of cohort ``eng`` with 50 on-demand CPUs each (borrowing
limit 50 and 10) and spot CPUs only in the first queue (100, lent to the second).
"""

from __future__ import annotations

from rayquota.queueing import (
    Admit,
    ClusterQueue,
    Decision,
    Engine,
    FlavorQuotas,
    LocalQueue,
    Phase,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)


def _eng_cohort() -> Engine:
    e = Engine()
    for flavor in ("on-demand", "spot"):
        e.upsert_flavor(ResourceFlavor(flavor))
    quotas = {"alpha": ((50, 50), (100, 0)), "beta": ((50, 10), (0, 100))}
    for name, ((od, od_borrow), (spot, spot_borrow)) in quotas.items():
        flavors = (
            FlavorQuotas("on-demand", {"cpu": ResourceQuota.of(od, od_borrow)}),
            FlavorQuotas("spot", {"cpu": ResourceQuota.of(spot, spot_borrow)}),
        )
        e.upsert_cluster_queue(ClusterQueue(name, (ResourceGroup(("cpu",), flavors),), cohort="eng"))
        e.upsert_local_queue(LocalQueue(name, "main", name))
    return e


def _cpus(namespace: str, name: str, cpus: int, *, created: float, priority: int = 0) -> Workload:
    pod_set = PodSet.of("one", cpus, {"cpu": 1})
    return Workload(namespace, name, "main", (pod_set,), priority=priority, created=created)


def _flavors(decisions: list[Decision]) -> dict[str, str]:
    return {d.workload: d.pod_sets[0].flavors["cpu"] for d in decisions if isinstance(d, Admit)}


def test_same_end_state_one_cycle_sooner() -> None:
    """Kueue leaves beta/new pending in the first cycle (its on-demand nomination no longer fits
    after alpha/new) and admits it on spot in the next; rayquota admits it on spot at once."""
    e = _eng_cohort()
    e.add_workload(_cpus("alpha", "new", 45, created=0))
    e.add_workload(_cpus("beta", "new", 56, created=1))
    assert _flavors(e.run_cycle()) == {"alpha/new": "on-demand", "beta/new": "spot"}


def test_different_end_state_when_a_workload_arrives_between_the_cycles() -> None:
    """Where the outcome is not the same: a workload of alpha needing 60 CPUs (more than on-demand
    has left, within alpha's own spot quota) arrives after the first cycle. In Kueue beta/new is
    still pending then; the newcomer, within nominal quota, is ordered first and takes spot, and
    beta/new keeps waiting. In rayquota beta/new already runs on spot, borrowed from alpha, and the
    newcomer waits: alpha's queue has no preemption policy to take its quota back."""
    e = _eng_cohort()
    e.add_workload(_cpus("alpha", "new", 45, created=0))
    e.add_workload(_cpus("beta", "new", 56, created=1))
    e.run_cycle()
    e.add_workload(_cpus("alpha", "urgent", 60, created=2))
    decisions = e.run_cycle()
    assert _flavors(decisions) == {}
    status = e.workload("alpha/urgent")
    assert status is not None and status.phase is Phase.PENDING
    assert "spot" in status.pending_reason
