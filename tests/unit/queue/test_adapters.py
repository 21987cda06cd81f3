from __future__ import annotations

import copy

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.record_helpers import gate_cleared_by_hand
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.operator.queue.gating.coverage import allocate
from rayquota.queueing import PodSetAssignment, ResourceFlavor, Toleration
from tests.unit.queue import bodies

H100 = ResourceFlavor(
    "h100",
    {"nvidia.com/gpu.product": "H100"},
    (),
    (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
)
FLAVORS = {"h100": H100, "cpu": ResourceFlavor("cpu")}


def admit_all(demand: Demand, scale: float = 1.0) -> AdmittedSlice:
    """An admission of every pod set (``scale`` of its pods), GPUs on H100."""
    pod_sets = []
    for ps in demand.pod_sets:
        count = int(ps.count * scale)
        flavors = {r: ("h100" if r == "nvidia.com/gpu" else "cpu") for r in ps.requests}
        pod_sets.append(
            PodSetAssignment(ps.name, count, flavors, {r: q * count for r, q in ps.requests.items()})
        )
    return AdmittedSlice("team-a", tuple(pod_sets), {})


def test_raycluster_run_with_injects_flavor_and_lifts_the_gate_and_restore_undoes_it() -> None:
    adapter = ADAPTERS["RayCluster"]
    cluster = bodies.raycluster()
    cluster["spec"]["suspend"] = True
    worker_template = cluster["spec"]["workerGroupSpecs"][0]["template"]
    worker_template["spec"]["nodeSelector"] = {"zone": "z1"}
    original = copy.deepcopy(cluster)
    [edit] = adapter.run_with(cluster, [], admit_all(adapter.pod_sets(cluster, [])), FLAVORS)
    worker = edit.body["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert edit.body["spec"]["suspend"] is False
    assert worker["nodeSelector"] == {"zone": "z1", "nvidia.com/gpu.product": "H100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]
    assert cluster == original  # the input is never mutated
    # Applying it again changes nothing (idempotent).
    assert adapter.run_with(edit.body, [], admit_all(adapter.pod_sets(edit.body, [])), FLAVORS) == []
    [restored] = adapter.restore(edit.body, [])
    restored.body["spec"]["suspend"] = True
    assert restored.body == original


def test_rayjob_run_with_places_cluster_and_submitter_pods() -> None:
    adapter = ADAPTERS["RayJob"]
    job = bodies.rayjob()
    gpu_only = {"h100": H100, "cpu": H100}  # everything on H100, so the submitter gets it too
    [edit] = adapter.run_with(job, [], admit_all(adapter.pod_sets(job, [])), gpu_only)
    spec = edit.body["spec"]
    assert spec["suspend"] is False
    assert spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == H100.node_labels
    assert spec["submitterPodTemplate"]["spec"]["nodeSelector"] == H100.node_labels
    [restored] = adapter.restore(edit.body, [])
    assert "submitterPodTemplate" not in restored.body["spec"]
    assert "nodeSelector" not in restored.body["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]


def test_rayjob_finished_states_include_validation_failed() -> None:
    adapter = ADAPTERS["RayJob"]
    for state, done in (("Running", False), ("Complete", True), ("Failed", True), ("ValidationFailed", True)):
        job = bodies.rayjob()
        job["status"] = {"jobDeploymentStatus": state}
        assert adapter.finished(job) is done


def service_with_children() -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
    service = bodies.rayservice()
    service["spec"]["rayClusterConfig"]["suspend"] = True
    service["status"] = {
        "activeServiceStatus": {"rayClusterName": "svc-old"},
        "pendingServiceStatus": {"rayClusterName": "svc-new"},
    }
    old = bodies.child_cluster(
        service, "svc-old", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, gpus=1))
    )
    new = bodies.child_cluster(
        service, "svc-new", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, gpus=2))
    )
    old["spec"]["suspend"] = False
    new["spec"]["suspend"] = True
    return service, old, new


def test_rayservice_pending_child_stays_gated_until_the_slice_covers_it() -> None:
    adapter = ADAPTERS["RayService"]
    service, old, new = service_with_children()
    demand = adapter.pod_sets(service, [new, old])
    assert list(demand.parts) == ["svc-old", "svc-new"]  # active first whatever the input order
    full = admit_all(demand)
    # Quota for the old (active) child only: its head and its two 1-GPU workers.
    old_only = AdmittedSlice(
        "team-a",
        tuple(
            PodSetAssignment(ps.name, demand.parts["svc-old"].get(ps.name, 0), ps.flavors, ps.usage)
            for ps in full.pod_sets
        ),
        {},
    )
    edits = adapter.run_with(service, [old, new], old_only, FLAVORS)
    assert [e.body["metadata"]["name"] for e in edits] == ["svc-old"]  # placement only; it already ran
    assert all(e.kind == "RayCluster" for e in edits)
    edits = adapter.run_with(service, [old, new], full, FLAVORS)
    ungated = {e.body["metadata"]["name"]: e.body["spec"]["suspend"] for e in edits}
    assert ungated["svc-new"] is False


def test_rayservice_suspend_gates_the_config_and_every_child() -> None:
    adapter = ADAPTERS["RayService"]
    service, old, new = service_with_children()
    service["spec"]["rayClusterConfig"]["suspend"] = False
    edits = adapter.suspend(service, [old, new])
    assert [(e.kind, e.body["metadata"]["name"]) for e in edits] == [
        ("RayService", "svc"),
        ("RayCluster", "svc-old"),
    ]
    assert adapter.is_suspended(edits[0].body)


def test_a_running_part_is_capped_and_a_gated_one_needs_full_cover() -> None:
    demand = Demand((), {"old": {"h": 1, "w": 4}, "new": {"h": 1, "w": 4}}, {})
    shares = allocate(demand, {"h": 2, "w": 6}, running={"old"})
    assert shares["old"].runs and shares["old"].pods == {"h": 1, "w": 4}
    assert not shares["new"].runs  # 2 workers left of the 4 it needs
    shares = allocate(demand, {"h": 1, "w": 2}, running={"old"})
    assert shares["old"].runs and shares["old"].pods == {"h": 1, "w": 2}  # capped, still running
    assert not allocate(demand, None, running={"old"})["old"].runs


def test_pods_gone_ignores_finished_pods_but_not_terminating_ones() -> None:
    adapter = ADAPTERS["RayCluster"]
    done = bodies.pod("demo", "worker", "gpu", phase="Succeeded")
    terminating = bodies.pod("demo", "worker", "gpu")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert adapter.pods_gone({}, [done])
    assert not adapter.pods_gone({}, [done, terminating])


def test_injected_annotation_marks_only_what_was_added() -> None:
    adapter = ADAPTERS["RayCluster"]
    cluster = bodies.raycluster()
    [edit] = adapter.run_with(cluster, [], admit_all(adapter.pod_sets(cluster, [])), FLAVORS)
    head = edit.body["spec"]["headGroupSpec"]["template"]
    # The head asks for no GPU: its flavor is "cpu", which has no placement; nothing injected.
    assert naming.INJECTED_ANNOTATION not in (head.get("metadata") or {}).get("annotations", {})


def test_rayjob_demand_is_remembered_per_generation() -> None:
    adapter = ADAPTERS["RayJob"]
    job = bodies.rayjob("memo")
    job["metadata"]["generation"] = 1
    first = adapter.pod_sets(job, [])
    assert adapter.pod_sets(copy.deepcopy(job), []) is first
    bigger = copy.deepcopy(job)
    bigger["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = 5
    bigger["metadata"]["generation"] = 2
    assert adapter.pod_sets(bigger, []) != first
    assert adapter.pod_sets(bigger, []).counts() != first.counts()


def test_rayjob_run_with_places_a_cluster_created_before_the_admission_first() -> None:
    """A RayJob's cluster made before its admission (an older operator; a gate cleared by
    hand) gets the placement too, in an edit ahead of the one that lifts the RayJob's gate."""
    adapter = ADAPTERS["RayJob"]
    job = bodies.rayjob()
    child = bodies.raycluster("job-abcde")
    child["metadata"]["ownerReferences"] = [
        {"kind": "RayJob", "name": "job", "uid": job["metadata"]["uid"], "controller": True}
    ]
    child["spec"] = copy.deepcopy(job["spec"]["rayClusterSpec"])
    edits = adapter.run_with(job, [child], admit_all(adapter.pod_sets(job, [child])), FLAVORS)
    assert [e.kind for e in edits] == ["RayCluster", "RayJob"]
    worker = edits[0].body["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    assert edits[1].body["spec"]["suspend"] is False


def test_only_a_gate_cleared_after_creation_is_reported_as_cleared_by_hand() -> None:
    """An object at its first generation was written without suspend: gated quietly. A later
    generation without the gate means someone cleared it."""
    assert not gate_cleared_by_hand({"metadata": {"generation": 1}})
    assert gate_cleared_by_hand({"metadata": {"generation": 3}})
