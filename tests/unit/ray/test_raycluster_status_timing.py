"""Which RayCluster status changes are written at once and which are coalesced while pods move:
the available workers reaching the desired count (a scale-up done) is written at once, so
``AVAILABLE WORKERS`` does not lag the Running pod by the coalescing period."""

from __future__ import annotations

from rayquota.operator.ray.raycluster.status import status_settled, workers_caught_up


def test_the_last_worker_of_a_scale_up_running_is_written_at_once() -> None:
    before = {"state": "ready", "desiredWorkerReplicas": 2, "availableWorkerReplicas": 1}
    caught_up = {**before, "availableWorkerReplicas": 2}
    assert workers_caught_up(before, caught_up)


def test_progress_before_the_target_and_other_changes_are_coalesced() -> None:
    before = {"state": "ready", "desiredWorkerReplicas": 4, "availableWorkerReplicas": 1}
    assert not workers_caught_up(before, {**before, "availableWorkerReplicas": 2})  # on the way
    assert not workers_caught_up(before, {**before, "readyWorkerReplicas": 1})  # not the count
    settled = {"state": "ready", "desiredWorkerReplicas": 2, "availableWorkerReplicas": 2}
    assert not workers_caught_up(settled, {**settled, "desiredCPU": "3"})  # already there
    # A scale-down that lands on the target: the count users watch, written at once too.
    assert workers_caught_up({**settled, "availableWorkerReplicas": 3}, settled)


def test_a_status_with_nothing_in_motion_is_written_at_once() -> None:
    """The end of a change (a replaced head ready, every desired worker ready and running) is
    written at once; progress on the way is still coalesced (issue 34: the ~6 s settle time)."""
    ready = {"type": "HeadPodReady", "status": "True"}
    settled = {
        "state": "ready",
        "desiredWorkerReplicas": 2,
        "readyWorkerReplicas": 2,
        "availableWorkerReplicas": 2,
        "head": {"podName": "h2", "podIP": "10.0.0.9"},
        "conditions": [ready],
    }
    assert status_settled(settled)
    assert not status_settled({**settled, "conditions": [{**ready, "status": "False"}]})  # head not ready
    assert not status_settled({**settled, "readyWorkerReplicas": 1})  # a worker on its way
    assert not status_settled({**settled, "availableWorkerReplicas": 3})  # one still leaving
    assert not status_settled({**settled, "state": None})
