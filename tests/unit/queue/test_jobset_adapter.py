"""The JobSet's integration record: demand per replicatedJob, gate, placement injected and
restored, finish, its pods' pod sets, its Jobs accounted through it, and the configuration's
``integrations.frameworks`` turning it on and off."""

from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, enabled, registry
from rayquota.operator.queue.adapters.jobset import JOBSET_FRAMEWORK, JOBSET_PODS, jobset_changed
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.job_pod_ungater import pod_set_of_job
from rayquota.operator.queue.objects import QueueObjects
from rayquota.queueing import PodSetAssignment, TopologyAssignment, TopologyDomain
from tests.unit.queue.bodies import queued_batch_object
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.queue.test_adapters import FLAVORS, admit_all

JOBSET = ADAPTERS["JobSet"]


def replicated(
    name: str, replicas: int | None, parallelism: int | None, completions: int | None, gpus: str
) -> dict[str, Any]:
    job_spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeSelector": {"team": "a"},
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus}}}
                ],
            }
        }
    }
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    body: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if replicas is not None:
        body["replicas"] = replicas
    return body


def jobset(suspend: bool = True) -> dict[str, Any]:
    return queued_batch_object(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        {
            "suspend": suspend,
            "replicatedJobs": [
                replicated("driver", None, None, None, "0"),  # 1 Job of 1 pod
                replicated("workers", 3, 4, 2, "2"),  # 3 Jobs of min(4, 2) pods
            ],
        },
    )


def pod_of(replicated_job: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"train-{replicated_job}-0-0",
            "namespace": "team-a",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "train",
                "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
                "batch.kubernetes.io/job-name": f"train-{replicated_job}-0",
            },
        }
    }


def queue_objects(*jobsets: dict[str, Any], jobs: list[dict[str, Any]] | None = None) -> QueueObjects:
    kinds: dict[str, Any] = {k: FakeInformer() for k in ADAPTERS}
    kinds["JobSet"] = FakeInformer(list(jobsets))
    kinds["Job"] = FakeInformer(jobs or [])
    return QueueObjects(naming.QueueSettings(), kinds, FakeInformer(), fake_pod_informers())  # type: ignore[arg-type]


def test_one_pod_set_per_replicated_job_of_replicas_times_its_jobs_pods() -> None:
    demand = JOBSET.pod_sets(jobset(), [])
    assert [(ps.name, ps.count) for ps in demand.pod_sets] == [("driver", 1), ("workers", 6)]
    workers = demand.pod_sets[1]
    assert workers.requests == {"cpu": 1000, "nvidia.com/gpu": 2000}
    assert dict(workers.node_selector) == {"team": "a"}
    assert demand.parts == {"train": {"driver": 1, "workers": 6}}


def test_suspend_sets_spec_suspend_and_run_with_injects_each_flavor_then_lifts_it() -> None:
    running = jobset(suspend=False)
    [suspended] = JOBSET.suspend(running, [])
    assert suspended.kind == "JobSet" and suspended.body["spec"]["suspend"] is True
    assert JOBSET.is_suspended(suspended.body) and not JOBSET.is_suspended(running)

    obj = jobset()
    [edit] = JOBSET.run_with(obj, [], admit_all(JOBSET.pod_sets(obj, [])), FLAVORS)
    after = edit.body
    assert after["spec"]["suspend"] is False
    workers = after["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert workers["nodeSelector"] == {"team": "a", "nvidia.com/gpu.product": "H100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in workers["tolerations"]
    driver = after["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nvidia.com/gpu.product" not in driver["nodeSelector"]  # no GPU: the cpu flavor only
    assert obj["spec"]["suspend"] is True  # records edit copies


def test_restore_takes_out_what_run_with_injected_and_keeps_the_authors_selector() -> None:
    obj = jobset()
    [edit] = JOBSET.run_with(obj, [], admit_all(JOBSET.pod_sets(obj, [])), FLAVORS)
    placed = copy.deepcopy(edit.body)
    placed["spec"]["suspend"] = True  # the queue suspends before it restores
    [restored] = JOBSET.restore(placed, [])
    for index, replicated_job in enumerate(restored.body["spec"]["replicatedJobs"]):
        template = replicated_job["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"team": "a"}, index
        assert not template["spec"].get("tolerations")
        assert naming.INJECTED_ANNOTATION not in ((template.get("metadata") or {}).get("annotations") or {})
    assert JOBSET.restore(obj, []) == []  # nothing injected: nothing to write


def test_a_running_jobset_admitted_without_its_placement_is_stopped_first() -> None:
    obj = jobset(suspend=False)
    [edit] = JOBSET.run_with(obj, [], admit_all(JOBSET.pod_sets(obj, [])), FLAVORS)
    assert edit.body["spec"]["suspend"] is True
    assert edit.body["spec"]["replicatedJobs"] == obj["spec"]["replicatedJobs"]


def test_a_topology_assignment_gates_only_its_replicated_jobs_template() -> None:
    obj = jobset()
    admission = admit_all(JOBSET.pod_sets(obj, []))
    workers = admission.pod_sets[1]
    topology = TopologyAssignment(("kubernetes.io/hostname",), (TopologyDomain(("node-a",), 6),))
    placed = PodSetAssignment(workers.name, workers.count, workers.flavors, workers.usage, topology=topology)
    admission = type(admission)(admission.cluster_queue, (admission.pod_sets[0], placed), admission.usage)
    [edit] = JOBSET.run_with(obj, [], admission, FLAVORS)
    driver, gated = (r["template"]["spec"]["template"] for r in edit.body["spec"]["replicatedJobs"])
    assert pod_gate.gated({"spec": gated["spec"]}) and not pod_gate.gated({"spec": driver["spec"]})
    [restored] = JOBSET.restore({**edit.body, "spec": {**edit.body["spec"], "suspend": True}}, [])
    assert not pod_gate.gated(
        {"spec": restored.body["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]}
    )


def test_finished_by_its_completed_or_failed_condition_and_status_churn_is_filtered() -> None:
    obj = jobset(suspend=False)
    assert not JOBSET.finished(obj)
    for kind in ("Completed", "Failed"):
        assert JOBSET.finished({**obj, "status": {"conditions": [{"type": kind, "status": "True"}]}})
    counted = {**obj, "status": {"replicatedJobsStatus": [{"name": "workers", "active": 3}]}}
    assert not jobset_changed(MODIFIED, counted, obj)
    done = {**obj, "status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    assert jobset_changed(MODIFIED, done, obj)


def test_a_pod_maps_to_its_jobset_and_its_replicated_jobs_pod_set() -> None:
    obj = jobset(suspend=False)
    objects = queue_objects(obj)
    pod = pod_of("workers")
    assert JOBSET_PODS.matches(pod) and JOBSET_PODS.index(pod) == ["team-a/train"]
    assert objects.pod_owner(JOBSET_PODS, pod) is obj
    demand = JOBSET.pod_sets(obj, [])
    assert demand.pod_set_of["train"][JOBSET.group_of_pod(pod)] == "workers"
    assert demand.pod_set_of["train"][JOBSET.group_of_pod(pod_of("driver"))] == "driver"
    assert objects.workload_of_pod(pod) == f"team-a/{naming.workload_name('JobSet', 'train', 'uid-train')}"


def test_its_jobs_are_accounted_through_it_and_their_pods_released_in_their_pod_set() -> None:
    obj = jobset(suspend=False)
    job = {
        "kind": "Job",
        "metadata": {
            "name": "train-workers-0",
            "namespace": "team-a",
            "uid": "uid-job",
            "labels": {naming.KUEUE_QUEUE_LABEL: "team"},  # copied from the JobSet: still not queued alone
            "ownerReferences": [{"kind": "JobSet", "name": "train", "uid": "uid-train", "controller": True}],
        },
        "spec": {"template": {"metadata": {"labels": pod_of("workers")["metadata"]["labels"]}}},
    }
    objects = queue_objects(obj, jobs=[job])
    assert objects.queue_name("Job", job) is None
    owner = objects.queued_owner("Job", job)
    assert owner is not None and owner.kind == "JobSet"
    assert pod_set_of_job(owner, job, JOBSET.pod_sets(obj, [])) == "workers"


def test_integrations_frameworks_turns_the_jobset_kind_on_or_off() -> None:
    assert "JobSet" in enabled(ADAPTERS, None)  # unset: every kind
    assert "JobSet" in enabled(ADAPTERS, ["batch/job", JOBSET_FRAMEWORK])
    off = registry(False, frameworks=["batch/job", "ray.io/rayjob"])
    assert "JobSet" not in off and {"Job", "RayJob", "RayCluster", "RayService"} <= set(off)
    objects = QueueObjects(naming.QueueSettings(), {}, FakeInformer(), {}, adapters=off)  # type: ignore[arg-type]
    assert objects.queue_name("JobSet", jobset()) is None  # left off: never queued


def test_creation_refuses_a_jobset_whose_pod_sets_cannot_be_named() -> None:
    obj = jobset()
    assert JOBSET.creation_refusal(obj, "team") is None
    obj["spec"]["replicatedJobs"][1]["name"] = "driver"
    refusal = JOBSET.creation_refusal(obj, "team")
    assert refusal is not None and "spec.replicatedJobs" in refusal and "'driver'" in refusal
    obj["spec"]["replicatedJobs"] = []
    assert "spec.replicatedJobs" in (JOBSET.creation_refusal(obj, "team") or "")
