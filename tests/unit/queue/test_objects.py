"""Finding a queued object's pods: its clusters' and its submitter Job's (they hold quota too)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.rayjob import SUBMITTER_PODS
from rayquota.operator.queue.objects import POD_INDEX, Queued, QueueObjects, RecordingLookup, workload_key
from tests.unit.queue import bodies
from tests.unit.queue.fakes import fake_pod_informers


class OwnedStore:
    """A cache answering get() and the owner-uid index."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs
        self.store = self

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objs if o["metadata"]["name"] == name), None)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objs
            if any(r.get("uid") == value for r in o["metadata"].get("ownerReferences") or [])
        ]


def test_a_rayjobs_submitter_pods_count_in_its_part_even_once_its_cluster_and_job_are_gone() -> None:
    job = bodies.rayjob()
    pod = bodies.pod("x", "worker")
    pod["metadata"].update(
        name="job-abcde",
        namespace="team-a",
        labels={"ray.io/job-submitter": "true", "batch.kubernetes.io/job-name": "job"},
    )
    empty = OwnedStore([])
    informers = {"RayJob": OwnedStore([job]), "RayCluster": empty, "RayService": empty}
    submitter_pods = Indexed([pod], POD_INDEX, SUBMITTER_PODS.index)
    objects = QueueObjects(
        naming.QueueSettings(),
        informers,  # type: ignore[arg-type]
        empty,  # type: ignore[arg-type]
        fake_pod_informers(rayjob_submitter=submitter_pods),
    )
    queued = Queued("RayJob", job, ADAPTERS["RayJob"], workload_key("RayJob", job))
    # Suspended: no cluster and no submitter Job any more, the submitter pod still terminating.
    lookup = RecordingLookup(objects)
    assert objects.pods_by_part(queued, [], lookup=lookup) == {"job": [pod]}
    # Where it looked is remembered: the pod's events find the RayJob's Workload once it is gone.
    assert ("rayjob-submitter", "team-a/job") in lookup.looked_up
    assert objects.pod_owner(SUBMITTER_PODS, pod) is job


class Indexed:
    """A cache answering one index."""

    def __init__(self, objs: list[dict[str, Any]], name: str, indexer: Any) -> None:
        self.objs, self.name, self.indexer = objs, name, indexer
        self.store = self

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        assert index == self.name
        return [o for o in self.objs if value in self.indexer(o)]
