"""Small builders that keep the example tests readable."""

from __future__ import annotations

from rayquota.queueing import (
    ClusterQueue,
    Engine,
    FlavorQuotas,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from rayquota.queueing.builders import RECLAIM as RECLAIM  # the tests' policies, shared
from rayquota.queueing.builders import add_queue

GPU = "nvidia.com/gpu"


def gpu_group(*flavors: tuple[str, int, int | None, int | None]) -> tuple[ResourceGroup, ...]:
    """One resource group covering GPUs: (flavor, nominal, borrowing limit, lending limit) in order."""
    return (
        ResourceGroup(
            (GPU,),
            tuple(FlavorQuotas(name, {GPU: ResourceQuota.of(n, b, lend)}) for name, n, b, lend in flavors),
        ),
    )


def queue(engine: Engine, spec: ClusterQueue) -> None:
    """Create a ClusterQueue and a LocalQueue ``<cq name>/q`` pointing at it."""
    add_queue(engine, spec)


def gpus(
    namespace: str,
    name: str,
    count: int,
    *,
    priority: int = 0,
    created: float = 0.0,
    per_pod: int = 1,
    replaces: str | None = None,
    **pod_set: object,
) -> Workload:
    """A workload of ``count`` pods with ``per_pod`` GPUs each, in LocalQueue ``<namespace>/q``."""
    ps = PodSet.of("workers", count, {GPU: per_pod}, **pod_set)  # type: ignore[arg-type]
    return Workload(namespace, name, "q", (ps,), priority=priority, created=created, replaces=replaces)


def engine_with_flavors(*names: str, **kwargs: object) -> Engine:
    engine = Engine(**kwargs)  # type: ignore[arg-type]
    for name in names:
        engine.upsert_flavor(ResourceFlavor(name))
    return engine


def used(engine: Engine, cq: str, flavor: str = "h100") -> int:
    """Whole GPUs the queue holds in a flavor."""
    return engine.usage(cq).get((flavor, GPU), 0) // 1000


def reclaiming_cohort(*names: str, cohort: str = "pool", gpus_each: int = 4) -> Engine:
    """ClusterQueues of ``gpus_each`` h100 GPUs in one cohort, each with :data:`RECLAIM`."""
    e = engine_with_flavors("h100")
    for name in names:
        queue(
            e,
            ClusterQueue(name, gpu_group(("h100", gpus_each, None, None)), cohort=cohort, preemption=RECLAIM),
        )
    return e
