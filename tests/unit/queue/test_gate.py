from __future__ import annotations

from typing import Any

from rayquota.operator.core import QueueCondition
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


def with_status(gate: QueueGate, status: dict[str, Any]) -> None:
    job = gate.objects.informers["RayJob"].store.get("team-a", "job")
    assert job is not None
    key = workload_key("RayJob", job)
    gate.objects.workloads = FakeInformer(
        [{"metadata": {"name": key.name, "namespace": "team-a"}, "status": status}]
    )  # type: ignore[assignment]


def the_job(gate: QueueGate) -> dict[str, Any]:
    job = gate.objects.informers["RayJob"].store.get("team-a", "job")
    assert job is not None
    return job


def test_a_waiting_job_is_told_the_engines_reason() -> None:
    gate, _ = setup(admitted_workers=None)
    reason = "insufficient unused quota for nvidia.com/gpu in flavor a100, 8 more needed"
    with_status(gate, {"pendingReason": reason})
    assert gate.queue_condition("RayJob", the_job(gate)) == QueueCondition(False, "Pending", reason)


def test_an_admitted_job_is_told_so_and_a_waiting_scale_up_is_named() -> None:
    gate, _ = setup(admitted_workers=2)
    verdict = gate.queue_condition("RayJob", the_job(gate))
    assert verdict is not None and verdict.admitted and verdict.reason == "Admitted"
    workload = gate.objects.workloads.store.objs[0]  # type: ignore[attr-defined]
    with_status(gate, {**workload["status"], "pendingReason": "scale-up waiting: 2 more GPUs"})
    verdict = gate.queue_condition("RayJob", the_job(gate))
    assert verdict == QueueCondition(True, "Admitted", "scale-up waiting: 2 more GPUs", slice_waiting=True)


def test_a_queued_job_without_a_workload_yet_is_pending() -> None:
    gate, _ = setup(admitted_workers=None)
    verdict = gate.queue_condition("RayJob", the_job(gate))
    assert verdict is not None and not verdict.admitted and verdict.reason == "Pending"


def test_children_and_unqueued_objects_get_no_queue_condition() -> None:
    gate, cluster = setup(admitted_workers=1)
    assert gate.queue_condition("RayCluster", cluster) is None  # accounted through its RayJob
    assert gate.queue_condition("RayCluster", bodies.raycluster("free")) is None


def test_a_standalone_queued_cluster_gets_its_own_verdict() -> None:
    gate, _ = setup(admitted_workers=None)
    queued = bodies.raycluster("alone", **{"rayquota.io/queue-name": "team"})
    verdict = gate.queue_condition("RayCluster", queued)
    assert verdict is not None and not verdict.admitted
