from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.core import Placement, QueueCondition
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.rayjob import rayjob_demand
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.gating.gate import (
    NOTHING,
    WAITING_FOR_PLACEMENT,
    WAITING_FOR_QUOTA,
    QueueGate,
    recorded_admission,
)
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.queueing import PodSetAssignment, ResourceFlavor, Toleration
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers


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
    objects = QueueObjects(naming.QueueSettings(), informers, FakeInformer(workloads), fake_pod_informers())  # type: ignore[arg-type]
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


# --- the placement and budget the caps carry, and the gate's question -----------------------

A100 = ResourceFlavor(
    "a100",
    {"rayquota.io/gpu-pool": "a100"},
    tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
)


def admitted_to_a100(workers: int = 2) -> tuple[QueueGate, dict[str, Any]]:
    """The RayJob admitted on the a100 flavor, usage as the engine records it (per pod set)."""
    gate, cluster = setup(admitted_workers=None)
    job = the_job(gate)
    demand = rayjob_demand(job, "job-cluster")
    counts = {"head": 1, "gpu": workers, "submitter": 1}
    pod_sets = [
        PodSetAssignment(
            ps.name,
            counts[ps.name],
            dict.fromkeys(ps.requests, "a100"),
            {r: q * counts[ps.name] for r, q in ps.requests.items()},
        )
        for ps in demand.pod_sets
    ]
    with_status(gate, {"admission": converter.admission_to_api("cq", pod_sets)})
    gate.flavors = {"a100": A100}
    return gate, cluster


def test_caps_carry_the_flavors_placement_and_the_admitted_budget() -> None:
    gate, cluster = admitted_to_a100()
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.head and caps.worker_cap("gpu") == 2
    wanted = Placement(
        {"rayquota.io/gpu-pool": "a100"},
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
    )
    assert caps.placement_of(None) == wanted and caps.placement_of("gpu") == wanted
    assert caps.budget is not None and caps.budget["nvidia.com/gpu"] == 2000  # 2 workers of 1 GPU


def test_an_admission_on_a_flavor_the_cache_does_not_hold_allows_nothing() -> None:
    gate, cluster = admitted_to_a100()
    gate.flavors = {}
    assert gate.caps_for(cluster) == NOTHING


def test_the_budget_leaves_out_what_the_objects_other_clusters_still_hold() -> None:
    gate, cluster = admitted_to_a100()
    # An earlier cluster of the job (its pods terminating) still holds a GPU worker.
    old_worker = bodies.pod("job-old", "worker", "gpu")
    old_worker["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    old_worker["spec"] = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    gate.objects.pod_informers["ray-cluster"] = PodsByCluster({"job-old": [old_worker]})  # type: ignore[assignment]
    gate.lingering_parts = lambda _key: ["job-old"]
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.budget is not None and caps.budget["nvidia.com/gpu"] == 1000


def test_a_cluster_of_a_parent_the_cache_does_not_show_gets_nothing() -> None:
    gate, cluster = setup(admitted_workers=1)
    orphan = dict(cluster, metadata={**cluster["metadata"], "name": "other"})
    orphan["metadata"]["ownerReferences"] = [
        {"kind": "RayService", "name": "gone", "uid": "uid-gone", "controller": True}
    ]
    assert gate.caps_for(orphan) == NOTHING


def test_an_unsuspended_job_that_is_not_admitted_may_not_run() -> None:
    gate, _ = setup(admitted_workers=None, job_suspended=False)
    verdict = gate.may_run("RayJob", the_job(gate))
    assert verdict is not None and not verdict.open and verdict.reason == WAITING_FOR_QUOTA


def test_an_admitted_job_runs_only_once_its_templates_carry_the_placement() -> None:
    gate, _ = admitted_to_a100()
    job = the_job(gate)
    verdict = gate.may_run("RayJob", job)
    assert verdict is not None and verdict.admitted and not verdict.placed
    assert verdict.reason == WAITING_FOR_PLACEMENT and "gpu-pool=a100" in verdict.message
    workload = gate.objects.workload(workload_key("RayJob", job))
    admission = recorded_admission(workload)
    assert admission is not None
    edits = ADAPTERS["RayJob"].run_with(job, [], admission, {"a100": A100})
    verdict = gate.may_run("RayJob", edits[-1].body)
    assert verdict is not None and verdict.open


def test_a_job_whose_admission_covers_less_than_it_asks_may_not_run() -> None:
    gate, _ = admitted_to_a100(workers=1)  # the job asks for 2 workers
    verdict = gate.may_run("RayJob", the_job(gate))
    assert verdict is not None and not verdict.admitted


def test_a_new_child_of_a_queued_service_is_born_gated() -> None:
    gate, _ = setup(admitted_workers=None)
    service = bodies.rayservice()
    service["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    verdict = gate.may_run("RayService", service, part="svc-new")
    assert verdict is not None and not verdict.open
    assert gate.may_run("RayService", bodies.rayservice()) is None  # not queued: no gate


class PodsByCluster:
    """A pod cache answering the by-cluster index."""

    def __init__(self, by_cluster: dict[str, list[dict[str, Any]]]) -> None:
        self.store = self
        self.by_cluster = by_cluster

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        return self.by_cluster.get(value.split("/", 1)[-1], [])


def test_an_elastic_job_whose_autoscaler_asks_for_more_keeps_its_admission() -> None:
    """Its live cluster raised to 3 workers, 2 admitted: the scale-up waits as a slice (the
    planner caps the pods); the job is not told its quota went (that stops it, deletes its cluster)."""
    gate, cluster = admitted_to_a100(workers=2)
    job = the_job(gate)
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    cluster["spec"] = copy.deepcopy(job["spec"]["rayClusterSpec"])
    (group,) = cluster["spec"]["workerGroupSpecs"]
    group["replicas"] = 3
    verdict = gate.may_run("RayJob", job)
    assert verdict is not None and verdict.admitted
    # The same growth without the autoscaler (the job's own spec asks for 3) is not admitted.
    del job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"]
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = 3
    verdict = gate.may_run("RayJob", job)
    assert verdict is not None and not verdict.admitted


def test_a_scale_down_the_engine_decided_caps_pods_before_its_write_is_seen() -> None:
    # The cache still records 2 GPU workers; the engine has shrunk the admission to 1 and its
    # write is on the way. A worker planned now would outlive that write (gate matrix:
    # 3 GPUs live under an admission of 2).
    gate, cluster = admitted_to_a100()
    gate.decided_counts = lambda _key: {"head": 1, "gpu": 1, "submitter": 1}
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.head and caps.worker_cap("gpu") == 1
    assert caps.budget is not None and caps.budget["nvidia.com/gpu"] == 1000


def test_the_engine_running_ahead_with_a_larger_admission_allows_no_more_than_recorded() -> None:
    gate, cluster = admitted_to_a100()
    gate.decided_counts = lambda _key: {"head": 1, "gpu": 5, "submitter": 1}
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.worker_cap("gpu") == 2
    assert caps.budget is not None and caps.budget["nvidia.com/gpu"] == 2000


def test_a_pod_set_the_engine_no_longer_admits_gets_no_pod() -> None:
    gate, cluster = admitted_to_a100()
    gate.decided_counts = lambda _key: {"head": 1, "submitter": 1}
    caps = gate.caps_for(cluster)
    assert caps is not None and caps.head and caps.worker_cap("gpu") == 0
