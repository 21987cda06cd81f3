"""The batch/v1 Job's integration record: demand, gate, placement, start time, finish, children."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.job import job_changed
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.webhooks import review
from tests.unit.queue.bodies import queued_batch_object
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.queue.test_adapters import FLAVORS, admit_all

JOB = ADAPTERS["Job"]


def job(parallelism: int | None = 3, completions: int | None = 2, **spec: Any) -> dict[str, Any]:
    body = queued_batch_object(
        "batch/v1",
        "Job",
        {
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}
                    ]
                }
            },
            **spec,
        },
    )
    if parallelism is not None:
        body["spec"]["parallelism"] = parallelism
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


def objects() -> QueueObjects:
    kinds = {k: FakeInformer() for k in ADAPTERS}
    return QueueObjects(naming.QueueSettings(), kinds, FakeInformer(), fake_pod_informers())  # type: ignore[arg-type]


def test_one_pod_set_of_parallelism_pods_or_completions_if_fewer() -> None:
    [pod_set] = JOB.pod_sets(job(3, 2), []).pod_sets
    assert pod_set.count == 2 and pod_set.requests == {"cpu": 1000, "nvidia.com/gpu": 2000}
    assert JOB.pod_sets(job(3, None), []).pod_sets[0].count == 3
    assert JOB.pod_sets(job(None, None), []).pod_sets[0].count == 1  # parallelism defaults to 1
    assert JOB.pod_sets(job(2, 5), []).parts == {"train": {"main": 2}}


def test_run_with_places_the_template_and_lifts_the_gate_restore_undoes_it() -> None:
    body = job()
    [edit] = JOB.run_with(body, [], admit_all(JOB.pod_sets(body, [])), FLAVORS)
    spec = edit.body["spec"]
    assert spec["suspend"] is False
    assert spec["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    assert spec["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    # The demand keeps the user's shape: the injected placement is not part of it.
    assert JOB.pod_sets(edit.body, []) == JOB.pod_sets(body, [])
    suspended = {**edit.body, "spec": {**edit.body["spec"], "suspend": True}}
    [restored] = JOB.restore(suspended, [])
    assert "nodeSelector" not in restored.body["spec"]["template"]["spec"]


def test_a_partial_admission_leaves_the_gate_shut() -> None:
    body = job()
    [edit] = JOB.run_with(body, [], admit_all(JOB.pod_sets(body, []), scale=0.5), FLAVORS)
    assert edit.body["spec"]["suspend"] is True


def test_a_job_that_ran_gets_its_start_time_cleared_before_its_template_changes() -> None:
    """Kubernetes refuses a template change while status.startTime is set."""
    started = job()
    started["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    started["spec"]["suspend"] = False
    edits = JOB.suspend(started, [])
    assert [e.status_patch for e in edits] == [False, True]
    assert edits[0].body["spec"]["suspend"] is True and edits[1].body["status"] == {"startTime": None}
    started["spec"]["suspend"] = True
    for edits in (
        JOB.restore(started, []),
        JOB.run_with(started, [], admit_all(JOB.pod_sets(started, [])), FLAVORS),
    ):
        assert [(e.status_patch, e.body["status"]) for e in edits] == [(True, {"startTime": None})]


def test_finished_when_complete_or_failed() -> None:
    body = job()
    assert not JOB.finished(body)
    body["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert JOB.finished(body)
    body["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert JOB.finished(body)
    body["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    assert not JOB.finished(body)


def test_the_change_filter_skips_pod_counts_but_not_finishing_or_the_start_time() -> None:
    old = job()
    counted = {**old, "status": {"active": 2, "ready": 1}}
    assert not job_changed(MODIFIED, counted, old)
    assert job_changed(
        MODIFIED, {**old, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, old
    )
    assert job_changed(MODIFIED, old, {**old, "status": {"startTime": "t"}})


def test_a_rayjobs_submitter_job_is_never_queued_on_its_own() -> None:
    store = objects()
    submitter = job()
    assert store.queue_name("Job", submitter) == "team"
    submitter["metadata"]["ownerReferences"] = [
        {"kind": "RayJob", "name": "rj", "uid": "uid-rj", "controller": True}
    ]
    assert store.queue_name("Job", submitter) is None
    unsuspended = {**submitter, "spec": {**submitter["spec"], "suspend": False}}
    assert review.mutate("Job", unsuspended, store) == review.ALLOW


def test_the_webhook_creates_a_queued_job_suspended() -> None:
    verdict = review.mutate("Job", {**job(), "spec": {"parallelism": 1}}, objects())
    assert verdict.patch == ({"op": "add", "path": "/spec/suspend", "value": True},)


def test_an_admitted_job_running_unplaced_is_stopped_first() -> None:
    """Written unsuspended and admitted before the queue suspended it: its template cannot
    change while it runs, so it is suspended (its pods deleted) and placed on the next pass."""
    running = job()
    running["spec"]["suspend"] = False
    running["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    admission = admit_all(JOB.pod_sets(running, []))
    edits = JOB.run_with(running, [], admission, FLAVORS)
    assert (
        edits[0].body["spec"]["suspend"] is True
        and "nodeSelector" not in edits[0].body["spec"]["template"]["spec"]
    )
    # Once placed and running, nothing more to do.
    [placed] = JOB.run_with(job(), [], admission, FLAVORS)
    assert JOB.run_with(placed.body, [], admission, FLAVORS) == []
