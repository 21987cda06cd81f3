"""The release phase's pairing of freed slots with the jobs that took them."""

from __future__ import annotations

from benchmarks.flood_release import cohort_of_job, job_of_pod, pair


def test_a_pod_belongs_to_the_job_its_cluster_or_submitter_is_named_after() -> None:
    assert job_of_pod({"ray.io/cluster": "job-00012-x7k2p"}) == "job-00012"
    assert job_of_pod({"batch.kubernetes.io/job-name": "job-00012"}) == "job-00012"
    assert job_of_pod({"app": "other"}) is None


def test_slots_go_first_come_first_served_within_a_group() -> None:
    freed = {"a1": 10.0, "a2": 11.0, "b1": 10.5}
    started = {"x": 10.2, "y": 12.0, "z": 10.7}
    group = {"a1": "A", "a2": "A", "b1": "B", "x": "A", "y": "A", "z": "B"}.__getitem__
    pairs, unmatched = pair(freed, started, group)
    assert [(f, j, round(w, 2)) for f, j, w in pairs] == [
        ("a1", "x", 0.2),
        ("b1", "z", 0.2),
        ("a2", "y", 1.0),
    ]
    assert unmatched == 0


def test_a_start_before_any_slot_was_freed_takes_none() -> None:
    pairs, unmatched = pair({"a1": 10.0}, {"x": 9.0}, lambda _job: "all")
    assert pairs == [] and unmatched == 1


def test_jobs_are_dealt_over_queues_and_queues_over_cohorts() -> None:
    group = cohort_of_job(10, 2)
    assert group("job-00000") == group("job-00002") != group("job-00001")
