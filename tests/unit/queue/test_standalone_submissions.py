"""A Workload with no owner joins the engine's queues from the informer's callback, before any
reconcile reaches it (under a flood the reconciles run minutes behind the watch)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.cache.informer import ADDED, DELETED, MODIFIED
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.workloads.standalone import StandaloneSubmissions
from tests.unit.queue.fakes import two_teams


def body(name: str, *, generation: int = 1, **meta: Any) -> dict[str, Any]:
    pod_sets = [{"name": "w", "count": 1, "requests": {"gpu": "1"}}]
    metadata = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": generation, **meta}
    return {"metadata": metadata, "spec": {"queueName": "a", "podSets": pod_sets}}


def restored_loop() -> AdmissionLoop:
    loop = AdmissionLoop()
    for obj in two_teams(nominal=8):
        loop.driver.configure(obj)
    loop.restored.set()
    return loop


def admitted_after_a_cycle(loop: AdmissionLoop, name: str) -> bool:
    loop.driver.cycle(0.0)
    return loop.driver.admission(f"ns/{name}") is not None


def test_a_workload_is_submitted_from_its_watch_event() -> None:
    loop = restored_loop()
    StandaloneSubmissions(loop, lambda key: None).on_change(ADDED, body("w"), None)
    assert admitted_after_a_cycle(loop, "w")


def test_nothing_is_submitted_before_the_engine_is_restored() -> None:
    """Until the stored admissions are back in the engine a new workload could be given quota
    an admitted one holds; the reconcile submits it once the engine is restored."""
    loop = restored_loop()
    loop.restored.clear()
    StandaloneSubmissions(loop, lambda key: None).on_change(ADDED, body("w"), None)
    assert not admitted_after_a_cycle(loop, "w")


def test_owned_finished_deleted_or_deleting_workloads_are_left_to_the_reconcile() -> None:
    loop = restored_loop()
    finished = body("finished")
    finished["status"] = {"conditions": [{"type": "Finished", "status": "True"}]}
    cases = [
        (ADDED, body("owned", ownerReferences=[{"uid": "u", "kind": "RayJob", "name": "j"}])),
        (ADDED, finished),
        (MODIFIED, body("deleting", deletionTimestamp="2026-11-26T00:00:00Z")),
        (DELETED, body("deleted")),
    ]
    submissions = StandaloneSubmissions(loop, lambda key: None)
    for event, obj in cases:
        submissions.on_change(event, obj, None)
    # A queued Ray object's Workload (known by its owner, whatever its references say) too.
    StandaloneSubmissions(loop, lambda key: object()).on_change(ADDED, body("queued"), None)
    loop.driver.cycle(0.0)
    for name in ("owned", "finished", "deleting", "deleted", "queued"):
        assert loop.driver.admission(f"ns/{name}") is None, name


def test_status_echoes_are_not_submitted_again_a_new_generation_is() -> None:
    loop = restored_loop()
    submitted: list[int] = []
    real_submit = loop.driver.submit

    def submit(workload: Any) -> None:
        submitted.append(workload.pod_sets[0].count)
        real_submit(workload)

    loop.driver.submit = submit  # type: ignore[method-assign]
    submissions = StandaloneSubmissions(loop, lambda key: None)
    submissions.on_change(ADDED, body("w"), None)
    submissions.on_change(MODIFIED, body("w"), None)  # its status written: same generation
    bigger = body("w", generation=2)
    bigger["spec"]["podSets"][0]["count"] = 2
    submissions.on_change(MODIFIED, bigger, None)
    assert submitted == [1, 2]
    assert submissions.forget("ns/w") and not submissions.forget("ns/w")
