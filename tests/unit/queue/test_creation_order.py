"""Queue order among objects created in the same second: their creation resourceVersion."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.cache.informer import ADDED, DELETED, MODIFIED
from rayquota.operator.queue import naming
from rayquota.operator.queue.admission import converter, creation_order
from rayquota.operator.queue.admission.creation_order import CreationVersions
from rayquota.queueing import Admit
from tests.unit.queue.fakes import new_driver

SECOND = "2026-11-22T09:00:00Z"


def workload_body(
    name: str, version: int | None, *, queue: str = "a", annotation: str | None = None
) -> dict[str, Any]:
    """A Workload of 8 GPUs, created at 09:00:05; ``version``: its owner's creation resourceVersion
    (the owner was created at 09:00:00)."""
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "creationTimestamp": "2026-11-22T09:00:05Z"}
    if version is not None:
        annotation = f"{SECOND} {version}"
    if annotation is not None:
        meta["annotations"] = {naming.CREATION_ORDER_ANNOTATION: annotation}
    pod_sets = [{"name": "w", "count": 8, "requests": {"gpu": "1"}}]
    return {"metadata": meta, "spec": {"queueName": queue, "podSets": pod_sets}}


def test_the_annotation_gives_the_owners_creation_instant_and_order() -> None:
    ordered = converter.workload(workload_body("w", 1234))
    assert ordered.created == converter.timestamp(SECOND) and ordered.sequence == 1234
    # Not ours (no annotation), or unreadable: the Workload's own timestamp, order unknown.
    for body in (workload_body("w", None), workload_body("w", None, annotation="garbage")):
        plain = converter.workload(body)
        assert plain.created == converter.timestamp("2026-11-22T09:00:05Z") and plain.sequence == 0


def test_same_second_workloads_are_admitted_in_creation_order_whatever_the_arrival() -> None:
    for arrival in (["early", "late"], ["late", "early"]):
        driver, _ = new_driver(nominal=8)
        driver.submit(converter.workload(workload_body("filler", 1, queue="b")))
        driver.cycle(0)  # b is full: a has room for one of the two, and nothing to borrow
        versions = {"early": 100, "late": 101}
        for name in arrival:
            driver.submit(converter.workload(workload_body(name, versions[name])))
        admitted = [d.workload for d in driver.cycle(1) if isinstance(d, Admit)]
        assert admitted == ["ns/early"], arrival


def test_creation_versions_keep_the_first_version_seen() -> None:
    versions = CreationVersions()
    job = {"metadata": {"uid": "u1", "resourceVersion": "10", "creationTimestamp": SECOND}}
    versions.on_change(ADDED, job, None)
    updated = {"metadata": {**job["metadata"], "resourceVersion": "15"}}
    versions.on_change(MODIFIED, updated, job)
    assert versions.of(updated) == "10"
    assert creation_order.annotation_value(updated, versions.of(updated)) == f"{SECOND} 10"
    assert creation_order.parse({naming.CREATION_ORDER_ANNOTATION: f"{SECOND} 10"}) == (SECOND, 10)
    versions.on_change(DELETED, updated, None)
    assert versions.of(updated) == "15"  # never seen being created: its version now
