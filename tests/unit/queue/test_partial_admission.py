"""Partial admission on the operator side: the driver keeps a partially admitted workload as
it is (Kueue does not grow it later), and a batch/v1 Job with Kueue's
``kueue.x-k8s.io/job-min-parallelism`` runs with the admitted parallelism, gets back what it
asked for when restored, and has the annotation checked at creation."""

from __future__ import annotations

from dataclasses import replace

from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.job_partial import (
    ASKED_PARALLELISM_ANNOTATION,
    COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    MIN_PARALLELISM_ANNOTATION,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.webhooks import review
from rayquota.queueing import PodSetAssignment, Workload
from tests.unit.queue.fakes import GPU, gpu_workload, new_driver
from tests.unit.queue.test_adapters import FLAVORS
from tests.unit.queue.test_job_adapter import job, objects

JOB = ADAPTERS["Job"]


def partial(name: str, queue: str, count: int, min_count: int) -> Workload:
    wl = gpu_workload(name, queue, {"w1": count})
    return replace(wl, pod_sets=(replace(wl.pod_sets[0], min_count=min_count),))


def test_a_partially_admitted_workload_is_not_grown_and_asks_for_all_again_once_evicted() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("other", "b", {"w1": 8}))
    driver.cycle(0)
    driver.submit(partial("job", "a", 12, 4))
    driver.cycle(1)
    assert writer.admissions["ns/job"].counts() == {"w1": 8}  # a's 8, b lends nothing
    # The same demand again (every reconcile submits it): no scale-up slice waits for the rest.
    driver.submit(partial("job", "a", 12, 4))
    driver.cycle(2)
    assert driver.pending_reason("ns/job") is None
    assert [k for k in driver.engine.workload_keys()] == ["ns/other", "ns/job"]
    # A scale-down below the admitted count still applies at once.
    driver.submit(partial("job", "a", 6, 4))
    assert driver.admission("ns/job") is not None and driver.admission("ns/job").counts() == {"w1": 6}
    # Evicted (preempted by a higher-priority workload of a) and its pods gone: whole again.
    driver.submit(partial("job", "a", 12, 4))
    driver.submit(gpu_workload("urgent", "a", {"w1": 8}, priority=10))
    driver.cycle(3)
    assert "ns/job" in writer.evicting
    driver.pods_gone("ns/job")
    driver.cycle(4)
    assert writer.admissions["ns/urgent"].counts() == {"w1": 8}
    # Once the others finish, the whole count fits (a's 8 and b's 8): it is admitted whole.
    for key in ("ns/urgent", "ns/other"):
        driver.finish(key, pods_gone=True)
    driver.cycle(5)
    assert writer.admissions["ns/job"].counts() == {"w1": 12}


def annotated(parallelism: int, minimum: str, **annotations: str) -> dict[str, object]:
    body = job(parallelism, None)
    body["metadata"]["annotations"] = {MIN_PARALLELISM_ANNOTATION: minimum, **annotations}
    return body


def admitted(count: int) -> AdmittedSlice:
    usage = {"cpu": 1000 * count, GPU: 2000 * count}
    flavors = {"cpu": "cpu", GPU: "h100"}
    return AdmittedSlice("team-a", (PodSetAssignment("main", count, flavors, usage),), {})


def test_a_job_with_min_parallelism_asks_with_min_count_and_runs_with_the_admitted_parallelism() -> None:
    body = annotated(10, "4")
    [pod_set] = JOB.pod_sets(body, []).pod_sets
    assert (pod_set.count, pod_set.min_count) == (10, 4)
    [edit] = JOB.run_with(body, [], admitted(6), FLAVORS)
    after = edit.body
    assert after["spec"]["suspend"] is False and after["spec"]["parallelism"] == 6
    assert after["metadata"]["annotations"][ASKED_PARALLELISM_ANNOTATION] == "10"
    assert "completions" not in after["spec"]
    # Running, its demand is still what it asked for; reconciled again, nothing changes.
    assert JOB.pod_sets(after, []).pod_sets[0].count == 10
    assert JOB.run_with(after, [], admitted(6), FLAVORS) == []
    # Restored after an eviction: the parallelism it asked for, the record gone.
    suspended = {**after, "spec": {**after["spec"], "suspend": True}}
    [restored] = JOB.restore(suspended, [])
    assert restored.body["spec"]["parallelism"] == 10
    assert ASKED_PARALLELISM_ANNOTATION not in restored.body["metadata"]["annotations"]


def test_whole_admission_and_jobs_without_the_annotation_keep_their_parallelism() -> None:
    [edit] = JOB.run_with(annotated(10, "4"), [], admitted(10), FLAVORS)
    assert edit.body["spec"]["parallelism"] == 10
    assert ASKED_PARALLELISM_ANNOTATION not in edit.body["metadata"]["annotations"]
    assert JOB.pod_sets(job(10, None), []).pod_sets[0].min_count is None
    # Fewer pods than asked without minCount never starts the Job (the gate's rule).
    [placed] = JOB.run_with(job(10, None), [], admitted(6), FLAVORS)
    assert placed.body["spec"]["suspend"] is True and placed.body["spec"]["parallelism"] == 10


def test_completions_follow_the_parallelism_when_the_job_says_so() -> None:
    body = annotated(10, "4", **{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true"})
    body["spec"]["completions"] = 10
    [edit] = JOB.run_with(body, [], admitted(6), FLAVORS)
    assert (edit.body["spec"]["parallelism"], edit.body["spec"]["completions"]) == (6, 6)
    assert JOB.pod_sets(edit.body, []).pod_sets[0].count == 10
    suspended = {**edit.body, "spec": {**edit.body["spec"], "suspend": True}}
    [restored] = JOB.restore(suspended, [])
    assert (restored.body["spec"]["parallelism"], restored.body["spec"]["completions"]) == (10, 10)


def test_the_annotation_is_checked_at_creation_as_kueue_checks_it() -> None:
    path = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
    assert JOB.creation_refusal(annotated(10, "4"), "team") is None
    assert JOB.creation_refusal(annotated(10, "10"), "team") == (
        f"{path}: Invalid value: 10: should be between 0 and 9"
    )
    assert (
        JOB.creation_refusal(annotated(10, "0"), "team")
        == f"{path}: Invalid value: 0: should be between 0 and 9"
    )
    assert JOB.creation_refusal(annotated(10, "four"), "team") == (
        f'{path}: Invalid value: "four": must be an integer'
    )


def test_the_webhook_refuses_a_bad_annotation_at_creation() -> None:
    verdict = review.mutate("Job", annotated(20, "20"), objects())
    assert not verdict.allowed
    assert f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]: Invalid value: 20" in str(verdict.message)
    assert review.mutate("Job", annotated(20, "5"), objects()).allowed
