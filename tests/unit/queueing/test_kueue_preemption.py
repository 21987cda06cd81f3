"""Kueue v0.19.2's preemption cases run through rayquota's victim search.

Like Kueue's own tests, each case hands the preemptor a fixed flavor assignment (which
flavor-resources need preemption) and compares the chosen victims and the reason given to each.
"""

from __future__ import annotations

import pytest

from rayquota.queueing import (
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Engine,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    Preemption,
    ReclaimWithinCohortPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueuePolicy,
    Workload,
)
from rayquota.queueing.decisions import PodSetAssignment
from rayquota.queueing.model import FlavorResource
from rayquota.queueing.preemption import find_victims
from rayquota.queueing.quantities import parse_quantity

from .kueue_preemption_cases import CASES, Case, CohortNode, Queue


def _groups(
    spec: tuple[dict[str, dict[str, tuple[str, str | None, str | None]]], ...],
) -> tuple[ResourceGroup, ...]:
    out = []
    for group in spec:
        covered = tuple(dict.fromkeys(r for resources in group.values() for r in resources))
        flavors = tuple(
            FlavorQuotas(flavor, {r: ResourceQuota.of(*quota) for r, quota in resources.items()})
            for flavor, resources in group.items()
        )
        out.append(ResourceGroup(covered, flavors))
    return tuple(out)


def _cluster_queue(spec: Queue) -> ClusterQueue:
    preemption = Preemption(
        within_cluster_queue=WithinClusterQueuePolicy(spec.within),
        reclaim_within_cohort=ReclaimWithinCohortPolicy(spec.reclaim),
        borrow_within_cohort=BorrowWithinCohort(BorrowWithinCohortPolicy(spec.borrow), spec.threshold),
    )
    return ClusterQueue(spec.name, _groups(spec.groups), cohort=spec.cohort, preemption=preemption)


def _cohort(spec: CohortNode) -> Cohort:
    return Cohort(spec.name, spec.parent, _groups(spec.groups))


class _Parsed:
    """One workload string of the case notation."""

    def __init__(self, text: str, *, incoming: bool) -> None:
        words = text.split()
        if incoming:
            self.name, self.queue = "in", words.pop(0)
        else:
            self.name, self.queue = words.pop(0).split("@")
        self.priority = 0
        self.reserved = 0.0
        self.created = 0.0
        self.evicted = False
        self.usage: dict[FlavorResource, int] = {}
        self.short: set[FlavorResource] = set()
        for word in words:
            if word == "evicted":
                self.evicted = True
            elif word.startswith("p="):
                self.priority = int(word[2:])
            elif word.startswith("t="):
                self.reserved = float(word[2:])
            elif word.startswith("created="):
                self.created = float(word[8:])
            else:
                key, amount = word.split("=")
                resource, flavor = key.split(":")
                if amount.endswith("!"):
                    amount = amount[:-1]
                    self.short.add((flavor, resource))
                fr = (flavor, resource)
                self.usage[fr] = self.usage.get(fr, 0) + parse_quantity(amount)

    def workload(self) -> Workload:
        requests: dict[str, int] = {}
        for (_, resource), amount in self.usage.items():
            requests[resource] = requests.get(resource, 0) + amount
        return Workload(
            self.queue,
            self.name,
            "q",
            (PodSet("main", 1, requests),),
            priority=self.priority,
            created=self.created,
        )

    def pod_sets(self) -> list[PodSetAssignment]:
        # One pod set per flavor keeps a workload that uses two flavors of one resource exact.
        by_flavor: dict[str, dict[str, int]] = {}
        for (flavor, resource), amount in self.usage.items():
            by_flavor.setdefault(flavor, {})[resource] = amount
        return [
            PodSetAssignment(f"main-{flavor}", 1, {r: flavor for r in usage}, usage)
            for flavor, usage in by_flavor.items()
        ]


def decide(case: Case) -> dict[str, str]:
    """The victims rayquota chooses for the case's incoming workload, with their reasons."""
    engine = Engine()
    flavors = {f for spec in (*case.queues, *case.cohorts) for group in spec.groups for f in group}
    for flavor in sorted(flavors):
        engine.upsert_flavor(ResourceFlavor(flavor))
    for cohort in case.cohorts:
        engine.upsert_cohort(_cohort(cohort))
    for spec in case.queues:
        engine.upsert_cluster_queue(_cluster_queue(spec))
        engine.upsert_local_queue(LocalQueue(spec.name, "q", spec.name))
    admitted = sorted((_Parsed(text, incoming=False) for text in case.admitted), key=lambda w: w.reserved)
    for wl in admitted:  # admission order: the later reserved, the more recently admitted
        engine.restore_admission(wl.workload(), wl.queue, wl.pod_sets(), evicting=wl.evicted)
    incoming = _Parsed(case.incoming, incoming=True)
    engine.add_workload(incoming.workload())
    accounting = engine._accounting
    preemptor = engine._workloads[f"{incoming.queue}/in"]
    victims = find_victims(
        preemptor,
        accounting.queues[incoming.queue],
        incoming.usage,
        accounting.queues.__getitem__,
        engine._cycle + 1,
        False,
        short=incoming.short,
    )
    if victims is None:
        return {}
    return {v.key.split("/", 1)[1]: victims.kinds[v.key].value for v in victims.workloads}


@pytest.mark.parametrize("case", CASES, ids=[c.source.split()[0] + c.source.split()[-1] for c in CASES])
def test_kueue_preemption_case(case: Case) -> None:
    if case.unsupported:
        pytest.skip(case.unsupported)
    assert decide(case) == case.preempted, f"{case.name} ({case.source})"
