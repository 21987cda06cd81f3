"""Admission-only mode beside KubeRay's operator: the records of that mode never write what
KubeRay writes (a RayService's children's ``spec.suspend``), and their pods are held instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, KindAdapter, registry
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.operator.webhooks import pod_review, review
from rayquota.queueing import PodSetAssignment, ResourceFlavor
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.queue.test_gate import Informer

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
BESIDE = registry(beside_kuberay=True)


def service_with_child(suspended: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    service = bodies.rayservice()
    service["metadata"]["labels"] = dict(QUEUE)
    service["spec"]["rayClusterConfig"]["suspend"] = suspended
    child = bodies.child_cluster(service, "svc-a", dict(service["spec"]["rayClusterConfig"]))
    return service, child


def whole_admission(service: dict[str, Any], children: list[dict[str, Any]]) -> AdmittedSlice:
    demand = BESIDE["RayService"].pod_sets(service, children)
    assignments = tuple(PodSetAssignment(ps.name, ps.count, {}, {}) for ps in demand.pod_sets)
    return AdmittedSlice("cq", assignments, {})


def test_the_mode_picks_its_records() -> None:
    assert registry(beside_kuberay=False) is ADAPTERS
    assert BESIDE["RayService"].children_held_at_pods
    assert not ADAPTERS["RayService"].children_held_at_pods
    # A standalone RayCluster's own pods: KubeRay creates a scale-up's pods at once.
    assert BESIDE["RayCluster"].children_held_at_pods
    assert not ADAPTERS["RayCluster"].children_held_at_pods
    assert all(BESIDE[k] is ADAPTERS[k] for k in ADAPTERS if k not in ("RayService", "RayJob", "RayCluster"))


def test_admitted_beside_kuberay_the_service_gate_lifts_and_no_child_is_written() -> None:
    service, child = service_with_child(suspended=True)
    edits = BESIDE["RayService"].run_with(service, [child], whole_admission(service, [child]), {})
    assert [e.kind for e in edits] == ["RayService"]
    assert edits[0].body["spec"]["rayClusterConfig"]["suspend"] is False
    # Templates untouched: an edit there would start an upgrade in KubeRay.
    config = dict(edits[0].body["spec"]["rayClusterConfig"])
    config.pop("suspend")
    assert config == {k: v for k, v in service["spec"]["rayClusterConfig"].items() if k != "suspend"}


def test_the_own_reconcilers_mode_still_ungates_each_child() -> None:
    service, child = service_with_child(suspended=True)
    edits = ADAPTERS["RayService"].run_with(service, [child], whole_admission(service, [child]), {})
    assert "RayCluster" in [e.kind for e in edits]


def test_suspended_or_evicted_beside_kuberay_only_the_service_is_written() -> None:
    service, child = service_with_child(suspended=False)
    child["spec"]["suspend"] = False
    edits = BESIDE["RayService"].suspend(service, [child])
    assert [e.kind for e in edits] == ["RayService"]
    assert edits[0].body["spec"]["rayClusterConfig"]["suspend"] is True
    assert BESIDE["RayService"].restore(service, [child]) == []


def test_a_pending_child_is_covered_whole_or_not_at_all_while_the_active_one_keeps_its_share() -> None:
    service, active = service_with_child(suspended=False)
    active["spec"]["suspend"] = False
    service["status"] = {"activeServiceStatus": {"rayClusterName": "svc-a"}}
    pending = bodies.child_cluster(service, "svc-b", dict(service["spec"]["rayClusterConfig"]))
    pending["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    assert BESIDE["RayService"].running_parts(service, [active, pending]) == {"svc-a"}
    service["spec"]["rayClusterConfig"]["suspend"] = True
    assert BESIDE["RayService"].running_parts(service, [active, pending]) == set()


def objects_with(
    service: dict[str, Any],
    children: list[dict[str, Any]],
    admitted: bool,
    adapters: Mapping[str, KindAdapter] = BESIDE,
) -> QueueObjects:
    workloads = []
    if admitted:
        admission = whole_admission(service, children)
        workloads.append(
            {
                "metadata": {"name": workload_key("RayService", service).name, "namespace": "team-a"},
                "status": {"admission": converter.admission_to_api("cq", list(admission.pod_sets))},
            }
        )
    informers = {"RayJob": Informer([]), "RayCluster": Informer(children), "RayService": Informer([service])}
    return QueueObjects(
        naming.QueueSettings(),
        informers,  # type: ignore[arg-type]
        FakeInformer(workloads),  # type: ignore[arg-type]
        fake_pod_informers(),
        adapters=adapters,
    )


def test_kuberay_carrying_the_services_gate_to_a_child_is_not_refused() -> None:
    """The validating webhook would otherwise refuse KubeRay's own write, which it retries."""
    service, child = service_with_child(suspended=False)
    old = {**child, "spec": {**child["spec"], "suspend": True}}
    new = {**child, "spec": {**child["spec"], "suspend": False}}
    objects = objects_with(service, [child], admitted=False)
    assert review.validate_gate("RayCluster", new, old, objects, QueueGate(objects)).allowed


def test_in_the_own_mode_a_childs_suspend_is_cleared_only_once_the_admission_covers_its_head() -> None:
    """The contrast: rayquota's own reconcilers hold a child by its ``spec.suspend``, so the
    webhook judges clearing it by the child's caps (``PlansWithinCaps``)."""
    service, child = service_with_child(suspended=False)
    old = {**child, "spec": {**child["spec"], "suspend": True}}
    new = {**child, "spec": {**child["spec"], "suspend": False}}
    waiting = objects_with(service, [child], admitted=False, adapters=ADAPTERS)
    verdict = review.validate_gate("RayCluster", new, old, waiting, QueueGate(waiting))
    assert not verdict.allowed
    assert verdict.message.startswith(
        "RayCluster team-a/svc-a belongs to a queued object whose admitted quota"
    )
    admitted = objects_with(service, [child], admitted=True, adapters=ADAPTERS)
    assert review.validate_gate("RayCluster", new, old, admitted, QueueGate(admitted)).allowed


def test_clearing_the_services_gate_before_admission_is_refused_and_allowed_after() -> None:
    service, child = service_with_child(suspended=True)
    cleared = {
        **service,
        "spec": {
            **service["spec"],
            "rayClusterConfig": {**service["spec"]["rayClusterConfig"], "suspend": False},
        },
    }
    waiting = objects_with(service, [child], admitted=False)
    verdict = review.validate_gate("RayService", cleared, service, waiting, QueueGate(waiting))
    assert not verdict.allowed and "spec.rayClusterConfig.suspend" in verdict.message
    admitted = objects_with(service, [child], admitted=True)
    assert review.validate_gate("RayService", cleared, service, admitted, QueueGate(admitted)).allowed


def ray_pod(cluster: dict[str, Any] | None, name: str = "svc-a") -> dict[str, Any]:
    refs = []
    if cluster is not None:
        refs = [{"kind": "RayCluster", "name": name, "uid": cluster["metadata"]["uid"], "controller": True}]
    return {
        "metadata": {"generateName": f"{name}-", "labels": {"ray.io/cluster": name}, "ownerReferences": refs},
        "spec": {"containers": [{"name": "ray"}]},
    }


def test_the_pods_of_a_queued_services_clusters_are_created_behind_the_gate() -> None:
    service, child = service_with_child(suspended=False)
    objects = objects_with(service, [child], admitted=True)
    verdict = pod_review.hold_pod(ray_pod(child), "team-a", objects)
    assert verdict.allowed and verdict.patch[0]["value"] == [{"name": "rayquota.io/admission"}]


def test_a_pod_of_a_cluster_the_cache_does_not_show_is_held_too() -> None:
    service, child = service_with_child(suspended=False)
    objects = objects_with(service, [], admitted=True)
    assert pod_review.hold_pod(ray_pod(child), "team-a", objects).patch


def test_pods_of_unqueued_clusters_are_left_alone() -> None:
    service, child = service_with_child(suspended=False)
    service["metadata"]["labels"] = {}
    objects = objects_with(service, [child], admitted=False)
    assert not pod_review.hold_pod(ray_pod(child), "team-a", objects).patch
    unqueued = bodies.raycluster("solo")
    objects = objects_with(bodies.rayservice(), [unqueued], admitted=False)
    assert not pod_review.hold_pod(ray_pod(unqueued, "solo"), "team-a", objects).patch
    assert not pod_review.hold_pod({"metadata": {"labels": {}}, "spec": {}}, "team-a", objects).patch


def test_a_queued_standalone_clusters_pods_are_held_beside_kuberay_only() -> None:
    """KubeRay creates the pods of a scale-up (the autoscaler raising replicas) at once: beside
    it they are held until the grown slice is admitted. rayquota's own reconciler caps them."""
    standalone = bodies.raycluster("solo", **QUEUE)
    objects = objects_with(bodies.rayservice(), [standalone], admitted=False)
    verdict = pod_review.hold_pod(ray_pod(standalone, "solo"), "team-a", objects)
    assert verdict.allowed and verdict.patch[0]["value"] == [{"name": "rayquota.io/admission"}]
    objects.adapters = ADAPTERS
    assert not pod_review.hold_pod(ray_pod(standalone, "solo"), "team-a", objects).patch


def test_a_queued_clusters_pod_that_asks_for_a_topology_is_held_until_pinned() -> None:
    standalone = bodies.raycluster("solo", **QUEUE)
    objects = objects_with(bodies.rayservice(), [standalone], admitted=False)
    asking = ray_pod(standalone, "solo")
    asking["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-required-topology": "rack"}
    assert pod_review.hold_pod(asking, "team-a", objects).patch


def test_beside_kuberay_a_rayjob_gets_no_submitter_template_it_did_not_have() -> None:
    """KubeRay takes a present submitterPodTemplate as the whole pod: one carrying only the
    flavor's placement (no containers) would break its submitter."""
    job = bodies.rayjob()
    flavor = ResourceFlavor("a100", node_labels={"pool": "a100"})
    demand = ADAPTERS["RayJob"].pod_sets(job, [])
    admission = AdmittedSlice(
        "cq",
        tuple(PodSetAssignment(ps.name, ps.count, {"nvidia.com/gpu": "a100"}, {}) for ps in demand.pod_sets),
        {},
    )
    own = ADAPTERS["RayJob"].run_with(job, [], admission, {"a100": flavor})
    assert "submitterPodTemplate" in own[-1].body["spec"]  # rayquota's own builder reads a partial one
    [edit] = BESIDE["RayJob"].run_with(job, [], admission, {"a100": flavor})
    assert "submitterPodTemplate" not in edit.body["spec"]
    assert edit.body["spec"]["suspend"] is False
    head = edit.body["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["nodeSelector"]["pool"] == "a100"
    written = {
        **job,
        "spec": {**job["spec"], "submitterPodTemplate": {"spec": {"containers": [{"name": "s"}]}}},
    }
    [edit] = BESIDE["RayJob"].run_with(written, [], admission, {"a100": flavor})
    assert edit.body["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"]["pool"] == "a100"


def held_pod(cluster: dict[str, Any], name: str = "svc-a") -> dict[str, Any]:
    pod = ray_pod(cluster, name)
    pod["metadata"].update(name=f"{name}-head", namespace="team-a", uid=f"pod-{name}")
    pod["metadata"]["labels"]["ray.io/node-type"] = "head"
    pod["spec"]["schedulingGates"] = [{"name": "rayquota.io/admission"}]
    return pod


def test_a_user_removing_the_pod_gate_before_admission_is_refused() -> None:
    """POC hole 2, the pod form: a gate cannot be added back, so its removal is refused until
    the recorded admission covers the pod (the ungater's own patch then passes)."""
    service, child = service_with_child(suspended=False)
    pod = held_pod(child)
    cleared = {**pod, "spec": {**pod["spec"], "schedulingGates": []}}
    waiting = objects_with(service, [child], admitted=False)
    verdict = pod_review.keep_gate(cleared, pod, "team-a", waiting, QueueGate(waiting))
    assert not verdict.allowed
    assert "team-a/svc-a-head" in verdict.message and "rayquota.io/admission" in verdict.message
    admitted = objects_with(service, [child], admitted=True)
    assert pod_review.keep_gate(cleared, pod, "team-a", admitted, QueueGate(admitted)).allowed
    # Any other change of a held pod is not the webhook's business.
    relabelled = {**pod, "metadata": {**pod["metadata"], "labels": {**pod["metadata"]["labels"], "x": "y"}}}
    assert pod_review.keep_gate(relabelled, pod, "team-a", waiting, QueueGate(waiting)).allowed


def rayjob_with_cluster(worker_replicas: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A running RayJob (2 workers x 1 GPU as written) and the cluster KubeRay made for it, whose
    worker group now asks for ``worker_replicas`` (the autoscaler's write)."""
    job = bodies.rayjob(
        mode="HTTPMode", spec=bodies.cluster_spec(bodies.gpu_worker_group(), autoscaling=True)
    )
    job["spec"]["suspend"] = False
    job["status"] = {"rayClusterName": "job-abcde"}
    cluster = bodies.raycluster("job-abcde")
    cluster["metadata"]["labels"] = {
        "ray.io/originated-from-cr-name": "job",
        "ray.io/originated-from-crd": "RayJob",
    }
    cluster["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "uid-job", "controller": True}
    ]
    cluster["spec"] = bodies.cluster_spec(bodies.gpu_worker_group(replicas=worker_replicas), autoscaling=True)
    return job, cluster


def _worker_counts(demand: Any) -> list[int]:
    return [ps.count for ps in demand.pod_sets if ps.requests.get("nvidia.com/gpu")]


def test_beside_kuberay_a_rayjobs_demand_follows_its_clusters_replicas() -> None:
    """The Ray autoscaler raises the replicas of the RayJob's cluster, never the RayJob's own
    rayClusterSpec: beside KubeRay (which creates the new pods at once) the Workload asks for
    the grown slice. With rayquota's own reconcilers an autoscaling RayJob is elastic too
    (docs/autoscaler.md); in Kueue-API mode only with Kueue's elastic-job annotation."""
    job, cluster = rayjob_with_cluster(worker_replicas=4)
    assert _worker_counts(BESIDE["RayJob"].pod_sets(job, [cluster])) == [4]
    assert _worker_counts(ADAPTERS["RayJob"].pod_sets(job, [cluster])) == [4]
    kueue_api = registry(beside_kuberay=False, kueue_api=True)
    assert _worker_counts(kueue_api["RayJob"].pod_sets(job, [cluster])) == [2]
    job, same = rayjob_with_cluster(worker_replicas=2)
    assert _worker_counts(BESIDE["RayJob"].pod_sets(job, [same])) == [2]
    assert _worker_counts(BESIDE["RayJob"].pod_sets(job, [])) == [2]


def test_beside_kuberay_the_pods_of_a_rayjobs_cluster_are_created_behind_the_gate() -> None:
    job, cluster = rayjob_with_cluster(worker_replicas=2)
    informers = {"RayJob": Informer([job]), "RayCluster": Informer([cluster]), "RayService": Informer([])}
    objects = QueueObjects(
        naming.QueueSettings(),
        informers,  # type: ignore[arg-type]
        FakeInformer([]),  # type: ignore[arg-type]
        fake_pod_informers(),
        adapters=BESIDE,
    )
    pod = ray_pod(cluster, "job-abcde")
    verdict = pod_review.hold_pod(pod, "team-a", objects)
    assert verdict.allowed and verdict.patch[0]["value"] == [{"name": "rayquota.io/admission"}]
    objects.adapters = ADAPTERS
    assert not pod_review.hold_pod(pod, "team-a", objects).patch


def test_an_upgrade_before_the_first_serves_counts_the_cluster_it_replaces_first() -> None:
    """Before the first cluster serves, KubeRay calls an upgrade's new cluster pending and the
    first neither active nor pending. The first still runs (and holds its pods until KubeRay
    deletes it): it is counted first, so the shortage, and the Workload's reason, falls on the
    new cluster, the one that waits. A suspended leftover runs nothing: counted last."""
    service = bodies.rayservice()
    service["status"] = {"pendingServiceStatus": {"rayClusterName": "svc-new"}}
    first = bodies.child_cluster(service, "svc-first", bodies.cluster_spec(bodies.gpu_worker_group(gpus=2)))
    new = bodies.child_cluster(service, "svc-new", bodies.cluster_spec(bodies.gpu_worker_group(gpus=1)))
    first["metadata"]["creationTimestamp"], new["metadata"]["creationTimestamp"] = "t1", "t2"
    first["spec"]["suspend"] = new["spec"]["suspend"] = False
    for adapter in (BESIDE["RayService"], ADAPTERS["RayService"]):
        demand = adapter.pod_sets(service, [new, first])
        gpus = [
            ps.requests.get("nvidia.com/gpu") for ps in demand.pod_sets if ps.requests.get("nvidia.com/gpu")
        ]
        assert gpus == [2000, 1000], gpus  # milli-units
        assert list(demand.parts) == ["svc-first", "svc-new"]
    first["spec"]["suspend"] = True
    assert list(BESIDE["RayService"].pod_sets(service, [new, first]).parts) == ["svc-new", "svc-first"]
