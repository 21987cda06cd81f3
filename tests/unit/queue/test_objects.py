"""Finding a queued object's pods: its clusters' and its submitter Job's (they hold quota too)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.objects import Queued, QueueObjects, workload_key
from tests.unit.queue import bodies


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


def owned_by(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    return [{"kind": kind, "name": name, "uid": uid, "controller": True}]


def test_a_rayjobs_submitter_pods_count_in_its_part_even_without_a_cluster() -> None:
    job = bodies.rayjob()
    submitter = {"metadata": {"name": "job", "namespace": "team-a", "uid": "uid-submitter"}}
    submitter["metadata"]["ownerReferences"] = owned_by("RayJob", "job", job["metadata"]["uid"])
    pod = bodies.pod("x", "worker")
    pod["metadata"].update(
        name="job-abcde", namespace="team-a", ownerReferences=owned_by("Job", "job", "uid-submitter")
    )
    empty = OwnedStore([])
    informers = {"RayJob": OwnedStore([job]), "RayCluster": empty, "RayService": empty}
    objects = QueueObjects(
        naming.QueueSettings(),
        informers,  # type: ignore[arg-type]
        empty,  # type: ignore[arg-type]
        empty,  # type: ignore[arg-type]
        submitter_jobs=OwnedStore([submitter]),  # type: ignore[arg-type]
        submitter_pods=OwnedStore([pod]),  # type: ignore[arg-type]
    )
    queued = Queued("RayJob", job, ADAPTERS["RayJob"], workload_key("RayJob", job))
    # Suspended: no cluster any more, the submitter pod still terminating.
    assert objects.pods_by_part(queued, []) == {"job": [pod]}
    assert objects.pods_owned_by([job["metadata"]["uid"]]) == [pod]
    assert objects.workload_of_submitter_pod(pod) == [workload_key("RayJob", job)]
