"""Building an engine's queue configuration in a few calls: one flavor's quotas as a resource
group, a ClusterQueue with its LocalQueue, cohorts of alike ClusterQueues. Shared by the engine
benchmarks (benchmarks/engine.py, benchmarks/engine_dra.py) and the unit tests' worlds
(tests/unit/queueing/builders.py, tests/unit/queue/fakes.py)."""

from __future__ import annotations

from collections.abc import Mapping

from .engine.cycle import Engine
from .model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    LocalQueue,
    Preemption,
    ResourceGroup,
    ResourceQuota,
)
from .policies import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy

RECLAIM = Preemption(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)
"""Kueue's baseline policies: lower priority within a queue, reclaim anything in the cohort."""


def one_flavor_group(flavor: str, quotas: Mapping[str, ResourceQuota]) -> tuple[ResourceGroup, ...]:
    """One resource group covering ``quotas``' resources (in their order) in one flavor."""
    return (ResourceGroup(tuple(quotas), (FlavorQuotas(flavor, dict(quotas)),)),)


def add_queue(engine: Engine, spec: ClusterQueue, namespace: str | None = None, name: str = "q") -> None:
    """Create a ClusterQueue and a LocalQueue ``<namespace>/<name>`` (namespace: the
    ClusterQueue's name by default) pointing at it."""
    engine.upsert_cluster_queue(spec)
    engine.upsert_local_queue(LocalQueue(spec.name if namespace is None else namespace, name, spec.name))


def cohorts_of_queues(
    engine: Engine,
    cohorts: int,
    queues_per_cohort: int,
    groups: tuple[ResourceGroup, ...],
    preemption: Preemption = RECLAIM,
) -> list[str]:
    """``cohorts`` cohorts ``cohort-<c>`` of ``queues_per_cohort`` alike ClusterQueues
    ``cohort-<c>-cq-<q>``, each with a LocalQueue ``<cq>/default``; their names in order."""
    for c in range(cohorts):
        engine.upsert_cohort(Cohort(f"cohort-{c}"))
    names = []
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cohort-{c}-cq-{q}"
            add_queue(
                engine,
                ClusterQueue(name, groups, cohort=f"cohort-{c}", preemption=preemption),
                name="default",
            )
            names.append(name)
    return names
