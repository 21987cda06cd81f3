"""The pods of batch/v1 Jobs held at rayquota's scheduling gate (issue #36, point 3): a queued
Job's pods (the gate in its template, with a topology assignment) and a queued RayJob's
submitter's (from its template in rayquota's own mode, from the pod webhook beside KubeRay),
let through on their flavor and pinned to their assigned domains, per domain as assigned."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey, owner_uids
from rayquota.operator.core.cache.store import Store
from rayquota.operator.core.gate import Placement
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, BESIDE_KUBERAY
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.gating.job_pod_ungater import JobPodUngater, job_pod_set, room_of
from rayquota.operator.queue.objects import OWNER_INDEX, WORKLOAD_INDEX, QueueObjects, workload_key
from rayquota.operator.webhooks import configurations, pod_review
from rayquota.queueing import PodSetAssignment, ResourceFlavor, TopologyAssignment, TopologyDomain
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.queue.test_job_adapter import job

RACK = "rack"
RACKS = Placement({"pool": "racks"}, ({"key": "pool", "operator": "Exists", "effect": "NoSchedule"},))
FLAVORS = {"racks": ResourceFlavor("racks", node_labels={"pool": "racks"})}
GATE = {"name": pod_gate.SCHEDULING_GATE}


def racks(**counts: int) -> TopologyAssignment:
    return TopologyAssignment((RACK,), tuple(TopologyDomain((name,), n) for name, n in counts.items()))


def job_pod(
    name: str, *, held: bool = True, rack: str | None = None, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if held:
        spec["schedulingGates"] = [dict(GATE)]
    if rack is not None:
        spec["nodeSelector"] = {RACK: rack}
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "creationTimestamp": f"2026-01-01T00:00:{len(name):02d}Z",
            "labels": {"batch.kubernetes.io/job-name": "train"},
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": "uid-train", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def racks_of(holding: pod_gate.Holding) -> list[str | None]:
    return [r.placement.node_selector.get(RACK) for r in holding.releases]


# --- which pods go, and where -------------------------------------------------------------------


def test_nothing_admitted_lets_no_job_pod_through_and_says_why() -> None:
    holding = pod_gate.pod_set_releases(room_of(None, "main", FLAVORS), [job_pod("a")])
    assert not holding.releases and holding.waiting == ("its pods wait: not admitted",)


def test_a_job_under_no_quota_has_its_held_pods_let_through_as_they_are() -> None:
    holding = pod_gate.pod_set_releases(None, [job_pod("a"), job_pod("b", held=False)])
    assert [r.pod["metadata"]["name"] for r in holding.releases] == ["a"]
    assert holding.releases[0].patch() == [
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": pod_gate.SCHEDULING_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]


def test_pods_are_pinned_per_domain_as_assigned_counting_those_already_through() -> None:
    room = pod_gate.PodSetRoom(4, RACKS, tuple((dict(s), n) for s, n in racks(r0=1, r1=3).node_selectors()))
    pods = [
        job_pod("through", held=False, rack="r1"),
        job_pod("a"),
        job_pod("bb"),
        job_pod("ccc"),
        job_pod("dddd"),
    ]
    holding = pod_gate.pod_set_releases(room, pods)
    # r1 already has one: r0 gets one, r1 two more; the fourth held pod is beyond the count.
    assert racks_of(holding) == ["r0", "r1", "r1"]
    assert holding.waiting == ("a pod waits: the admitted quota covers 4 of its pods",)
    patch = holding.releases[0].patch()
    assert {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "racks", RACK: "r0"}} in patch
    assert {"op": "add", "path": "/spec/tolerations", "value": [dict(RACKS.tolerations[0])]} in patch


def test_a_finished_pod_frees_its_place_in_its_domain() -> None:
    room = pod_gate.PodSetRoom(1, RACKS, tuple((dict(s), n) for s, n in racks(r0=1).node_selectors()))
    done = job_pod("done", held=False, rack="r0", phase="Succeeded")
    assert racks_of(pod_gate.pod_set_releases(room, [done, job_pod("next")])) == ["r0"]
    running = job_pod("run", held=False, rack="r0")
    assert not pod_gate.pod_set_releases(room, [running, job_pod("next")]).releases


def test_the_room_comes_from_the_recorded_admission_and_fails_closed_on_an_unknown_flavor() -> None:
    admission = AdmittedSlice(
        "cq", (PodSetAssignment("main", 2, {"nvidia.com/gpu": "racks"}, {}, racks(r0=2)),), {}
    )
    room = room_of(admission, "main", FLAVORS)
    assert room.count == 2 and room.placement.node_selector == {"pool": "racks"}
    assert room.domains == (({RACK: "r0"}, 2),)
    assert room_of(admission, "main", {}).count == 0
    assert room_of(admission, "submitter", FLAVORS).count == 0


def test_the_pod_set_of_a_jobs_pods_is_the_jobs_or_the_rayjobs_submitter() -> None:
    assert job_pod_set(ADAPTERS["Job"].pod_sets(job(), [])) == "main"
    assert job_pod_set(ADAPTERS["RayJob"].pod_sets(bodies.rayjob(), [])) == "submitter"
    assert job_pod_set(ADAPTERS["RayJob"].pod_sets(bodies.rayjob(mode="HTTPMode"), [])) is None


# --- the gate in the templates (no webhook needed) ----------------------------------------------


def admission_of(demand_pod_sets: Any, topology_for: str | None) -> AdmittedSlice:
    return AdmittedSlice(
        "cq",
        tuple(
            PodSetAssignment(
                ps.name,
                ps.count,
                {"nvidia.com/gpu": "racks"},
                {},
                racks(r0=ps.count) if ps.name == topology_for else None,
            )
            for ps in demand_pod_sets
        ),
        {},
    )


def test_a_queued_job_admitted_with_topology_gets_the_gate_in_its_template_and_loses_it_on_eviction() -> None:
    body = job(2, 2)
    adapter = ADAPTERS["Job"]
    demand = adapter.pod_sets(body, [])
    [edit] = adapter.run_with(body, [], admission_of(demand.pod_sets, "main"), FLAVORS)
    template = edit.body["spec"]["template"]
    assert edit.body["spec"]["suspend"] is False
    assert template["spec"]["schedulingGates"] == [GATE]
    assert template["spec"]["nodeSelector"] == {"pool": "racks"}
    [restored] = adapter.restore({**edit.body, "spec": {**edit.body["spec"], "suspend": True}}, [])
    assert "schedulingGates" not in restored.body["spec"]["template"]["spec"]
    # Without a topology assignment the flavor's placement in the template is enough.
    [plain] = adapter.run_with(body, [], admission_of(demand.pod_sets, None), FLAVORS)
    assert "schedulingGates" not in plain.body["spec"]["template"]["spec"]


def test_a_rayjobs_submitter_assigned_a_domain_is_born_held_in_own_mode() -> None:
    rayjob = bodies.rayjob()
    demand = ADAPTERS["RayJob"].pod_sets(rayjob, [])
    admission = admission_of(demand.pod_sets, "submitter")
    [edit] = ADAPTERS["RayJob"].run_with(rayjob, [], admission, FLAVORS)
    assert edit.body["spec"]["submitterPodTemplate"]["spec"]["schedulingGates"] == [GATE]
    [restored] = ADAPTERS["RayJob"].restore(edit.body, [])
    assert "submitterPodTemplate" not in restored.body["spec"]  # it was only ours
    # Beside KubeRay a template it did not write is never created (the pod webhook holds it).
    [beside] = BESIDE_KUBERAY["RayJob"].run_with(rayjob, [], admission, FLAVORS)
    assert "submitterPodTemplate" not in beside.body["spec"]


# --- the pod webhook beside KubeRay -------------------------------------------------------------


def store(jobs: list[dict[str, Any]], rayjobs: list[dict[str, Any]]) -> QueueObjects:
    kinds: dict[str, Any] = {k: FakeInformer() for k in ADAPTERS}
    kinds["Job"] = FakeInformer(jobs)
    kinds["RayJob"] = FakeInformer(rayjobs)
    return QueueObjects(
        naming.QueueSettings(),
        kinds,
        FakeInformer(),  # type: ignore[arg-type]
        fake_pod_informers(),
        adapters=BESIDE_KUBERAY,
    )


def submitter_of(rayjob: dict[str, Any]) -> dict[str, Any]:
    body = job(1, 1)
    body["metadata"]["labels"] = {}
    body["metadata"]["ownerReferences"] = [
        {
            "kind": "RayJob",
            "name": rayjob["metadata"]["name"],
            "uid": rayjob["metadata"]["uid"],
            "controller": True,
        }
    ]
    return body


def test_a_queued_rayjobs_submitter_pod_is_created_behind_the_gate() -> None:
    rayjob = bodies.rayjob("train")
    verdict = pod_review.hold_pod(job_pod("s", held=False), "team-a", store([submitter_of(rayjob)], [rayjob]))
    assert verdict.patch == ({"op": "add", "path": "/spec/schedulingGates", "value": [GATE]},)
    # Its RayJob not cached yet: held too (fail closed).
    assert pod_review.hold_pod(job_pod("s", held=False), "team-a", store([submitter_of(rayjob)], [])).patch


def test_pods_of_unqueued_jobs_and_queued_jobs_own_pods_are_left_to_their_template() -> None:
    rayjob = bodies.rayjob("train")
    rayjob["metadata"]["labels"] = {}
    assert not pod_review.hold_pod(
        job_pod("s", held=False), "team-a", store([submitter_of(rayjob)], [rayjob])
    ).patch
    unqueued = job(1, 1)
    unqueued["metadata"]["labels"] = {}
    assert not pod_review.hold_pod(job_pod("p", held=False), "team-a", store([unqueued], [])).patch
    assert not pod_review.hold_pod(job_pod("p", held=False), "team-a", store([job(1, 1)], [])).patch
    # A Job the cache does not show yet: held until the ungater sees it.
    assert pod_review.hold_pod(job_pod("p", held=False), "team-a", store([], [])).patch


def test_admission_only_mode_registers_a_job_pod_hook_on_job_pods_only() -> None:
    mutating, _ = configurations.webhook_configurations("https://x", "CA", (naming.KUEUE_QUEUE_LABEL,), True)
    [hook] = [h for h in mutating["webhooks"] if h["name"].startswith("job-pod-gate")]
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]
    }
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kube-public",
        "kube-node-lease",
    ]
    assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["url"] == "https://x/mutate-pod"
    own, _ = configurations.webhook_configurations("https://x", "CA", (naming.KUEUE_QUEUE_LABEL,), False)
    assert not [h for h in own["webhooks"] if "pod-gate" in h["name"]]


def test_the_workload_key_of_a_submitters_rayjob_is_the_one_the_ungater_reads() -> None:
    rayjob = bodies.rayjob("train")
    objects = store([submitter_of(rayjob)], [rayjob])
    owner = objects.queued_owner("Job", submitter_of(rayjob))
    assert owner is not None and owner.workload == workload_key("RayJob", rayjob)


class Cached:
    """An informer's cache: a store indexed by owner uid."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.store = Store({OWNER_INDEX: owner_uids})
        for obj in objs:
            self.store.upsert(obj)


def test_a_workload_change_looks_again_at_its_queued_job_or_at_the_jobs_its_rayjob_owns() -> None:
    """A queued Job gates its own pods (``GatesItsOwnPods``): its Workload names the Job itself.
    A RayJob's names the Jobs it owns (its submitter), not the RayJob."""
    solo = job(1, 1)
    solo["metadata"].update(name="solo", uid="uid-solo")
    rayjob = bodies.rayjob("train")
    kinds = {kind: Cached([]) for kind in ADAPTERS}
    kinds.update(Job=Cached([solo, submitter_of(rayjob)]), RayJob=Cached([rayjob]))
    objects = QueueObjects(naming.QueueSettings(), kinds, FakeInformer(), fake_pod_informers())  # type: ignore[arg-type]
    for kind, cached in kinds.items():
        cached.store.add_indexer(WORKLOAD_INDEX, objects._workload_index(kind))
    ungater = JobPodUngater(None, objects, QueueGate(objects))  # type: ignore[arg-type]

    def jobs_looked_at(workload: ObjectKey) -> list[ObjectKey]:
        return ungater._jobs_of_workload(
            {"metadata": {"namespace": workload.namespace, "name": workload.name}}
        )

    assert jobs_looked_at(workload_key("Job", solo)) == [ObjectKey("team-a", "solo")]
    assert jobs_looked_at(workload_key("RayJob", rayjob)) == [ObjectKey("team-a", "train")]
    assert jobs_looked_at(ObjectKey("team-a", "no-such-workload")) == []


def test_a_queued_clusters_pod_is_held_when_its_admission_assigned_domains_without_annotations() -> None:
    """A topology flavor implies an assignment: KubeRay's pods are held to it too. (Beside KubeRay a
    standalone cluster's pods are held anyway, for its scale-ups; the rule is shown here with a
    record that does not hold a cluster's pods.)"""
    cluster = bodies.raycluster("solo", **{naming.KUEUE_QUEUE_LABEL: "team-a"})
    demand = BESIDE_KUBERAY["RayCluster"].pod_sets(cluster, [])

    def objects(topology: bool) -> QueueObjects:
        assignments = [
            PodSetAssignment(
                ps.name, ps.count, {"cpu": "racks"}, {}, racks(r0=ps.count) if topology else None
            )
            for ps in demand.pod_sets
        ]
        workload = {
            "metadata": {"name": workload_key("RayCluster", cluster).name, "namespace": "team-a"},
            "status": {"admission": converter.admission_to_api("cq", assignments)},
        }
        kinds: dict[str, Any] = {k: FakeInformer() for k in ADAPTERS}
        kinds["RayCluster"] = FakeInformer([cluster])
        return QueueObjects(
            naming.QueueSettings(),
            kinds,
            FakeInformer([workload]),  # type: ignore[arg-type]
            fake_pod_informers(),
            adapters={**BESIDE_KUBERAY, "RayCluster": ADAPTERS["RayCluster"]},
        )

    pod = {
        "metadata": {"name": "solo-head", "labels": {"ray.io/cluster": "solo", "ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray"}]},
    }
    assert pod_review.hold_pod(pod, "team-a", objects(topology=True)).patch
    assert not pod_review.hold_pod(pod, "team-a", objects(topology=False)).patch
