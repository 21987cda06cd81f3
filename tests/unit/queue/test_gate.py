from __future__ import annotations

from typing import Any

from rayquota.operator.queue import converter, naming
from rayquota.operator.queue.gate import NOTHING, QueueGate
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.operator.queue.podsets import rayjob_demand
from rayquota.queueing import PodSetAssignment
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer


class IndexedStore:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objs if o["metadata"]["name"] == name), None)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objs
            if any(r.get("uid") == value for r in o["metadata"].get("ownerReferences") or [])
        ]


class Informer:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.store = IndexedStore(objs)


def setup(admitted_workers: int | None, job_suspended: bool = False) -> tuple[QueueGate, dict[str, Any]]:
    job = bodies.rayjob()
    job["spec"]["suspend"] = job_suspended
    cluster = bodies.raycluster("job-cluster")
    cluster["metadata"]["labels"] = {}
    cluster["metadata"]["ownerReferences"] = [
        {"kind": "RayJob", "name": "job", "uid": job["metadata"]["uid"], "controller": True}
    ]
    cluster["spec"] = job["spec"]["rayClusterSpec"]
    workloads = []
    if admitted_workers is not None:
        demand = rayjob_demand(job, "job-cluster")
        counts = {"head": 1, "gpu": admitted_workers, "submitter": 1}
        pod_sets = [PodSetAssignment(ps.name, counts[ps.name], {}, {}) for ps in demand.pod_sets]
        workloads.append(
            {
                "metadata": {"name": workload_key("RayJob", job).name, "namespace": "team-a"},
                "status": {"admission": converter.admission_to_api("cq", pod_sets)},
            }
        )
    informers = {"RayJob": Informer([job]), "RayCluster": Informer([cluster]), "RayService": Informer([])}
    objects = QueueObjects(naming.QueueSettings(), informers, FakeInformer(workloads), FakeInformer())  # type: ignore[arg-type]
    return QueueGate(objects), cluster


def test_a_child_of_a_job_that_is_not_admitted_gets_nothing() -> None:
    gate, cluster = setup(admitted_workers=None)
    assert gate.caps_for(cluster) == NOTHING


def test_a_child_is_capped_at_the_admitted_workers() -> None:
    gate, cluster = setup(admitted_workers=1)  # the job wants 2 workers; a slice of 1 is admitted
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.head and caps.worker_cap("gpu") == 1


def test_unqueued_clusters_are_not_capped() -> None:
    gate, _ = setup(admitted_workers=None)
    assert gate.caps_for(bodies.raycluster("free")) is None
