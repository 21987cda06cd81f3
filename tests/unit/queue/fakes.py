"""A fake writer and a tiny two-team world for driving :class:`Driver` without a cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.queue.admission.driver import AdmittedSlice, Driver
from rayquota.queueing import (
    ClusterQueue,
    Cohort,
    Engine,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceQuota,
    Workload,
)
from rayquota.queueing.builders import RECLAIM, one_flavor_group

NAMESPACE = "ns"
GPU = "gpu"


@dataclass
class RecordingWriter:
    """Keeps what an API server would hold: the last admission written per workload."""

    admissions: dict[str, AdmittedSlice] = field(default_factory=dict)
    evicting: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    admit_calls: list[str] = field(default_factory=list)

    def admitted(self, workload: str, admission: AdmittedSlice) -> None:
        self.admit_calls.append(workload)
        self.admissions[workload] = admission
        self.reasons.pop(workload, None)

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        self.reasons[workload] = reason

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        self.evicting[workload] = reason


def two_teams(nominal: int = 8) -> list[ResourceFlavor | Cohort | ClusterQueue | LocalQueue]:
    """Teams a and b, ``nominal`` GPUs each, in one cohort; both may reclaim and preempt."""
    config: list[ResourceFlavor | Cohort | ClusterQueue | LocalQueue] = [ResourceFlavor("f"), Cohort("pool")]
    for team in ("a", "b"):
        config.append(
            ClusterQueue(
                team,
                one_flavor_group("f", {GPU: ResourceQuota.of(nominal)}),
                cohort="pool",
                preemption=RECLAIM,
            )
        )
        config.append(LocalQueue(NAMESPACE, team, team))
    return config


def new_driver(nominal: int = 8) -> tuple[Driver, RecordingWriter]:
    writer = RecordingWriter()
    driver = Driver(Engine(), writer)
    for obj in two_teams(nominal):
        driver.configure(obj)
    return driver, writer


def gpu_workload(
    name: str, queue: str, counts: dict[str, int], priority: int = 0, created: float = 0.0
) -> Workload:
    """Pod set ``wN`` has pods of N GPUs each."""
    pod_sets = tuple(PodSet.of(ps, n, {GPU: int(ps[1:])}) for ps, n in sorted(counts.items()))
    return Workload(NAMESPACE, name, queue, pod_sets, priority=priority, created=created)


class FakeStore:
    def __init__(self, objs: list[dict[str, Any]] | None = None) -> None:
        self.objs = objs or []

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objs if o["metadata"]["name"] == name), None)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        return []

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.objs)


class FakeInformer:
    def __init__(self, objs: list[dict[str, Any]] | None = None) -> None:
        self.store = FakeStore(objs)


def fake_pod_informers(**by_watch: Any) -> dict[str, Any]:
    """An empty pod informer per registered pod watch (``by_watch`` replaces some by name)."""
    from rayquota.operator.queue.adapters import pod_watches

    return {watch.name: by_watch.get(watch.name.replace("-", "_"), FakeInformer()) for watch in pod_watches()}
