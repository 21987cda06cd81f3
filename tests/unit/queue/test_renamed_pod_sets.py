"""A pod set renamed under running pods (an operator upgrade changed the shape digest): its
admission is carried over to the new name, on the same flavors, by the driver and the gate."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.driver import AdmittedSlice, Driver
from rayquota.operator.queue.admission.renamed_pod_sets import carried_counts, carried_over, renames, stem
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.queueing import (
    ClusterQueue,
    Engine,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, RecordingWriter, fake_pod_informers
from tests.unit.queue.test_gate import Informer, PodsByCluster

GPU = "gpu"


def assignment(name: str, count: int, flavor: str, gpus_per_pod: int = 1) -> PodSetAssignment:
    return PodSetAssignment(name, count, {GPU: flavor}, {GPU: gpus_per_pod * 1000 * count})


def slice_of(*pod_sets: PodSetAssignment) -> AdmittedSlice:
    return AdmittedSlice("cq", pod_sets, {})


def test_the_stem_is_the_name_without_its_shape_digest() -> None:
    assert stem("gpu-1a2b3") == "gpu" and stem("head-0f9e8") == "head"
    assert stem("gpu") == "gpu" and stem("gpu-small") == "gpu-small"


def test_a_renamed_pod_set_keeps_its_flavor_and_count_under_the_new_name() -> None:
    admission = slice_of(assignment("head-aaaaa", 1, "cpu", 0), assignment("gpu-1a2b3", 2, "second"))
    demand = [PodSet.of("head-aaaaa", 1, {}), PodSet.of("gpu-4c5d6", 2, {GPU: 1})]
    carried = carried_over(admission, demand)
    assert carried.counts() == {"head-aaaaa": 1, "gpu-4c5d6": 2}
    assert carried.flavors_of("gpu-4c5d6") == {"second"}
    assert carried.pod_sets[-1].usage == {GPU: 2000}


def test_other_pods_are_not_taken_for_renamed_ones() -> None:
    admission = slice_of(assignment("gpu-1a2b3", 2, "second"))
    other_shape = [PodSet.of("gpu-4c5d6", 2, {GPU: 2})]  # 2 GPUs a pod: not the admitted pods
    other_group = [PodSet.of("big-4c5d6", 2, {GPU: 1})]
    still_named = [PodSet.of("gpu-1a2b3", 2, {GPU: 1}), PodSet.of("gpu-4c5d6", 1, {GPU: 1})]
    for demand in (other_shape, other_group, still_named):
        assert carried_over(admission, demand) == admission


def test_a_merged_pod_set_split_apart_gives_each_part_what_it_admitted_and_no_more() -> None:
    # Two children's workers were one pod set under the old rule; now two, and one grew.
    admission = slice_of(assignment("gpu-1a2b3", 3, "second"))
    demand = [PodSet.of("gpu-aaaaa", 2, {GPU: 1}), PodSet.of("gpu-bbbbb", 2, {GPU: 1})]
    assert renames(admission, demand)[1].count == 1
    carried = carried_over(admission, demand)
    assert carried.counts() == {"gpu-aaaaa": 2, "gpu-bbbbb": 1}  # 3 admitted in all, as before
    assert sum(ps.usage[GPU] for ps in carried.pod_sets) == 3000


def test_the_engines_counts_follow_the_same_renames_until_it_carries_them_itself() -> None:
    admission = slice_of(assignment("gpu-1a2b3", 2, "second"))
    moves = renames(admission, [PodSet.of("gpu-4c5d6", 2, {GPU: 1})])
    assert carried_counts({"gpu-1a2b3": 2}, moves) == {"gpu-1a2b3": 0, "gpu-4c5d6": 2}
    assert carried_counts({"gpu-4c5d6": 2}, moves) == {"gpu-4c5d6": 2}


# --- the driver: an operator restarted under a renamed pod set -------------------------------


def two_flavor_driver() -> tuple[Driver, RecordingWriter]:
    """Flavor ``first`` (1 GPU) is tried before ``second`` (2 GPUs)."""
    writer = RecordingWriter()
    driver = Driver(Engine(), writer)
    driver.configure(ResourceFlavor("first"))
    driver.configure(ResourceFlavor("second"))
    quotas = (
        FlavorQuotas("first", {GPU: ResourceQuota.of(1)}),
        FlavorQuotas("second", {GPU: ResourceQuota.of(2)}),
    )
    driver.configure(ClusterQueue("cq", (ResourceGroup((GPU,), quotas),)))
    driver.configure(LocalQueue("ns", "q", "cq"))
    return driver, writer


def test_a_restart_under_a_renamed_pod_set_frees_nothing_and_moves_no_flavor() -> None:
    # Admitted on ``second`` when ``first`` was full; ``first`` has room now; a 2-GPU workload
    # waits for ``second``, which the service's running pod uses.
    driver, writer = two_flavor_driver()
    old = Workload("ns", "svc", "q", (PodSet.of("gpu-1a2b3", 1, {GPU: 1}),), created=1)
    driver.restore(old, "cq", (assignment("gpu-1a2b3", 1, "second"),), evicting=False)
    driver.submit(old)
    driver.submit(Workload("ns", "big", "q", (PodSet.of("main", 1, {GPU: 2}),), created=2))
    driver.cycle(0)
    assert "ns/big" not in writer.admissions

    driver.submit(Workload("ns", "svc", "q", (PodSet.of("gpu-4c5d6", 1, {GPU: 1}),), created=1))
    for now in (1, 2):
        driver.cycle(now)
    admission = driver.admission("ns/svc")
    assert admission is not None and admission.counts() == {"gpu-4c5d6": 1}
    assert admission.flavors_of("gpu-4c5d6") == {"second"}  # where its pod runs
    assert writer.admissions["ns/svc"] == admission  # recorded, so a restart restores it
    assert "ns/big" not in writer.admissions  # the quota the pod uses was never free
    assert driver.engine.usage("cq") == {("second", GPU): 1000}


# --- the gate: the recorded admission still names the old pod set ----------------------------


def service_admitted_under_an_old_name() -> tuple[QueueGate, dict[str, Any], dict[str, Any], str]:
    """A RayService with one child of 2 GPU workers, admitted on ``a100`` under the old names."""
    service = bodies.rayservice()
    service["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    child = bodies.child_cluster(service, "svc-1", bodies.cluster_spec())
    demand = rayservice_demand(service, [child])
    old_name = {ps.name: f"{stem(ps.name)}-0a1b2" for ps in demand.pod_sets}
    pod_sets = [
        PodSetAssignment(
            old_name[ps.name],
            ps.count,
            dict.fromkeys(ps.requests, "a100"),
            {r: q * ps.count for r, q in ps.requests.items()},
        )
        for ps in demand.pod_sets
    ]
    workload = {
        "metadata": {"name": workload_key("RayService", service).name, "namespace": "team-a"},
        "status": {"admission": converter.admission_to_api("cq", pod_sets)},
    }
    informers = {"RayJob": Informer([]), "RayCluster": Informer([child]), "RayService": Informer([service])}
    objects = QueueObjects(naming.QueueSettings(), informers, FakeInformer([workload]), fake_pod_informers())  # type: ignore[arg-type]
    running = [bodies.pod("svc-1", "head"), bodies.pod("svc-1", "worker", "gpu")]
    objects.pod_informers["ray-cluster"] = PodsByCluster({"svc-1": running})  # type: ignore[assignment]
    gate = QueueGate(objects, {"a100": ResourceFlavor("a100", {"rayquota.io/gpu-pool": "a100"})})
    worker = next(ps for ps in demand.pod_sets if ps.name.startswith("gpu-"))
    return gate, service, child, old_name[worker.name]


def test_the_gate_caps_the_running_pods_by_what_they_were_admitted_under_the_old_name() -> None:
    gate, service, child, old_worker = service_admitted_under_an_old_name()
    caps = gate.caps_for(child)
    assert caps is not None and caps.head and caps.worker_cap("gpu") == 2
    assert caps.placement_of("gpu").node_selector == {"rayquota.io/gpu-pool": "a100"}
    # The engine still holds the old name (not submitted yet), then the new one: the same caps.
    gate.decided_counts = lambda _key: {old_worker: 2, "head-0a1b2": 1}
    assert gate.caps_for(child) == caps
    verdict = gate.may_run("RayService", service, part="svc-1")
    assert verdict is not None and verdict.admitted  # still covered: nothing re-gated
