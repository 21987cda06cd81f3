"""The judge's JobSet rules, the early start of a JobSet written unsuspended without the webhook
(tests/gate_early_start.py), and the Jobs tests/jobset_controller.py makes of a JobSet."""

from __future__ import annotations

from typing import Any

from tests.gate_early_start import EarlyStart
from tests.gate_invariants import Judge, Version
from tests.jobset_controller import JOB_INDEX, JOBSET_NAME, REPLICATED_JOB, new_job, resume_patch
from tests.unit.testing.test_gate_invariants import A100, NODES, TOLERATION, cluster_queue

JOBSET: dict[str, Any] = {"metadata": {"name": "train", "uid": "uid-js"}, "spec": {"suspend": True}}
OWNED_BY_JOBSET = [{"kind": "JobSet", "name": "train", "uid": "uid-js", "controller": True}]


def child_job(suspend: bool, uid: str = "uid-job", **status: Any) -> dict[str, Any]:
    meta = {"name": "train-workers-0", "uid": uid, "ownerReferences": OWNED_BY_JOBSET}
    return {"metadata": meta, "spec": {"suspend": suspend}, "status": status}


def jobset_pod(name: str = "train-workers-0-x", job_uid: str = "uid-job", **extra: Any) -> dict[str, Any]:
    owner = [{"kind": "Job", "name": "train-workers-0", "uid": job_uid, "controller": True}]
    meta = {"name": name, "uid": f"uid-{name}", "labels": {JOBSET_NAME: "train"}, "ownerReferences": owner}
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
    spec.update(nodeSelector={"pool": "a100"}, tolerations=[TOLERATION])
    return {"metadata": {**meta, **extra}, "spec": spec, "status": {}}


def jobset_workload(admitted: bool) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if admitted:
        status["admission"] = {
            "podSetAssignments": [{"name": "workers", "resourceUsage": {"nvidia.com/gpu": "1"}}]
        }
    return {"metadata": {"name": "wl", "uid": "uid-wl", "ownerReferences": OWNED_BY_JOBSET}, "status": status}


def history(*writes: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], bool]) -> list[Version]:
    return [
        Version(i, w[0], bool(w[2]) if len(w) > 2 else False, w[1])
        for i, w in enumerate([("ClusterQueue", cluster_queue(4)), *writes])
    ]


def judged(versions: list[Version]) -> list[str]:
    judge = Judge("cq", A100, NODES)
    return [p for version, state in judge.replay(versions) for p in judge.judge(version, state)]


def test_a_jobsets_job_unsuspended_or_pod_before_its_admission_is_caught() -> None:
    pending = ("Workload", jobset_workload(False))
    problems = judged(history(("JobSet", JOBSET), pending, ("Job", child_job(False))))
    assert any("Job train-workers-0 of JobSet train is unsuspended" in p for p in problems), problems
    # A pod behind a scheduling gate holds nothing, but it exists: caught too.
    gated = jobset_pod()
    gated["spec"]["schedulingGates"] = [{"name": "rayquota.io/admission"}]
    problems = judged(history(("JobSet", JOBSET), pending, ("Job", child_job(True)), ("Pod", gated)))
    assert any("pod train-workers-0-x of JobSet train exists" in p for p in problems), problems


def test_a_jobset_admitted_deleted_or_not_watched_says_nothing() -> None:
    running = [("Job", child_job(False)), ("Pod", jobset_pod())]
    assert judged(history(("JobSet", JOBSET), ("Workload", jobset_workload(True)), *running)) == []
    # Its Jobs suspended and no pods: nothing to say before the admission.
    assert (
        judged(history(("JobSet", JOBSET), ("Workload", jobset_workload(False)), ("Job", child_job(True))))
        == []
    )
    # Deleted (the garbage collector's), or not watched: not judged by these rules.
    deleting = {**JOBSET, "metadata": {**JOBSET["metadata"], "deletionTimestamp": "t"}}
    assert judged(history(("JobSet", deleting), ("Workload", jobset_workload(True)), *running)) == []
    assert not [p for p in judged(history(("Job", child_job(False)), ("Pod", jobset_pod()))) if "JobSet" in p]
    # A finished Job stays unsuspended once the quota is given back.
    done = child_job(False, conditions=[{"type": "Complete", "status": "True"}])
    assert judged(history(("JobSet", JOBSET), ("Workload", jobset_workload(False)), ("Job", done))) == []


def test_the_early_start_is_what_ran_before_the_gate_and_nothing_after() -> None:
    unsuspended = {**JOBSET, "spec": {"suspend": False}}
    versions = history(
        ("JobSet", unsuspended),  # as its user wrote it: JobSet's controller reads it so
        ("Job", child_job(False)),
        ("Pod", jobset_pod("early")),
        ("Workload", jobset_workload(True)),  # admitted at once ...
        ("JobSet", JOBSET),  # ... but stopped to be placed: the queue's gate
        ("Job", child_job(False, uid="uid-job2")),  # created from what the controller read first
        ("Pod", jobset_pod("stale", job_uid="uid-job2")),
        ("Job", child_job(True)),  # the gate reached them
        ("Job", child_job(True, uid="uid-job2")),
        ("Pod", jobset_pod("early", deletionTimestamp="t")),
        ("Pod", jobset_pod("early"), True),
        ("Pod", jobset_pod("stale"), True),
        ("JobSet", unsuspended),  # the queue lifts the gate, with the placement
        ("Job", child_job(False)),
        ("Pod", jobset_pod("late")),
        ("Job", child_job(False, uid="uid-later")),  # created after the gate lifted: not early
    )
    early = EarlyStart.of(versions)
    assert early.jobs == {"uid-job": 8, "uid-job2": 9} and early.unended() == []
    assert early.pods == {"uid-early", "uid-stale"}
    forgiven = [(v.kind, v.revision) for v in versions if early.covers(v)]
    assert forgiven == [("Job", 2), ("Pod", 3), ("Job", 6), ("Pod", 7), ("Pod", 10), ("Pod", 11), ("Pod", 12)]
    assert judged(versions) != [] and judged([v for v in versions if not early.covers(v)]) == []
    # Never suspended afterwards: said, and every version of it forgiven.
    assert EarlyStart.of(versions[:4]).unended() == ["uid-job"]
    # Written suspended (or by the webhook): nothing is early.
    assert EarlyStart.of(history(("JobSet", JOBSET), ("Job", child_job(True)))).jobs == {}


def test_the_jobs_of_a_jobset_are_made_as_it_reads_and_resumed_with_its_placement() -> None:
    replicated = {
        "name": "workers",
        "replicas": 2,
        "template": {"spec": {"template": {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": []}}}},
    }
    jobset = {"metadata": {"name": "train", "namespace": "ns", "uid": "uid-js"}, "spec": {"suspend": False}}
    job = new_job(jobset, replicated, 1)
    assert job["metadata"]["name"] == "train-workers-1" and job["spec"]["suspend"] is False
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-js"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels == {"a": "1", JOBSET_NAME: "train", REPLICATED_JOB: "workers", JOB_INDEX: "1"}
    job["spec"]["template"]["spec"].update(nodeSelector={"zone": "x"}, tolerations=[{"key": "k"}])
    placed = {"spec": {"nodeSelector": {"pool": "a100"}, "tolerations": [TOLERATION, {"key": "k"}]}}
    patch = resume_patch(job, placed)["spec"]
    assert patch["suspend"] is False
    assert patch["template"]["spec"]["nodeSelector"] == {"zone": "x", "pool": "a100"}
    assert patch["template"]["spec"]["tolerations"] == [{"key": "k"}, TOLERATION]
