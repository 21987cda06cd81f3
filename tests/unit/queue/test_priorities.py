"""Kueue's priority order for a queued object: the WorkloadPriorityClass label, the pod
templates' PriorityClass, the default PriorityClass, 0; and how the Workload records it."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.cache.informer import DELETED
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand.priorities import (
    POD_PRIORITY_CLASS_SOURCE,
    PriorityClasses,
    ResolvedPriority,
)
from rayquota.operator.queue.kueue import kueue_shapes


def _pod_class(name: str, value: int, global_default: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value, "globalDefault": global_default}


def _template(priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"spec": spec}


def _classes() -> PriorityClasses:
    classes = PriorityClasses()
    classes.on_workload_class("ADDED", {"metadata": {"name": "urgent"}, "value": 5000}, None)
    classes.on_pod_class("ADDED", _pod_class("high", 1000), None)
    classes.on_pod_class("ADDED", _pod_class("low", 10), None)
    return classes


def test_the_workload_priority_class_label_wins() -> None:
    resolved = _classes().resolve("urgent", [_template("high")])
    assert resolved.value == 5000 and resolved.class_name == "urgent"
    assert resolved.workload_spec() == {"priority": 5000, "priorityClassName": "urgent"}


def test_else_the_first_template_that_names_a_priority_class() -> None:
    resolved = _classes().resolve(None, [_template(), _template("low"), _template("high")])
    assert resolved == ResolvedPriority(10, "low", POD_PRIORITY_CLASS_SOURCE)
    assert resolved.workload_spec() == {
        "priority": 10,
        "priorityClassName": "low",
        "priorityClassSource": POD_PRIORITY_CLASS_SOURCE,
    }


def test_else_the_lowest_default_priority_class_else_zero() -> None:
    classes = _classes()
    assert classes.resolve(None, [_template()]) == ResolvedPriority(0)
    assert classes.resolve(None, [_template()]).workload_spec() == {"priority": 0}
    classes.on_pod_class("ADDED", _pod_class("default-b", 200, global_default=True), None)
    classes.on_pod_class("ADDED", _pod_class("default-a", 100, global_default=True), None)
    assert classes.resolve(None, [_template()]) == ResolvedPriority(
        100, "default-a", POD_PRIORITY_CLASS_SOURCE
    )
    classes.on_pod_class(DELETED, _pod_class("default-a", 100, global_default=True), None)
    assert classes.resolve(None, [_template()]).value == 200


def test_a_class_not_known_yet_counts_zero() -> None:
    assert _classes().resolve(None, [_template("missing")]).value == 0
    assert _classes().resolve("missing", []).value == 0


def test_kueue_shapes_name_the_pod_priority_class_and_read_it_back() -> None:
    spec = {
        "queueName": "q",
        "podSets": [],
        **ResolvedPriority(10, "low", POD_PRIORITY_CLASS_SOURCE).workload_spec(),
    }
    kueue = kueue_shapes.workload_spec_to_kueue(spec)
    assert kueue["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}
    assert "priorityClassSource" not in kueue and "priorityClassName" not in kueue
    back = kueue_shapes.rayquota_spec(kueue)
    assert back["priorityClassName"] == "low" and back["priorityClassSource"] == POD_PRIORITY_CLASS_SOURCE
    workload_class = kueue_shapes.workload_spec_to_kueue({"podSets": [], "priorityClassName": "urgent"})
    assert workload_class["priorityClassRef"]["kind"] == "WorkloadPriorityClass"


def test_converter_does_not_read_a_pod_priority_class_as_a_workload_priority_class() -> None:
    def body(spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"namespace": "ns", "name": "w"},
            "spec": {"queueName": "q", "podSets": [], **spec},
        }

    values = {"low": 7}
    pod_ref = {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}}
    assert converter.workload(body(pod_ref), values.get).priority == 0
    wpc_ref = {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"}
    }
    assert converter.workload(body(wpc_ref), values.get).priority == 7
