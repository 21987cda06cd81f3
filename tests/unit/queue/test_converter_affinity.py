"""The converter reads a Workload's required node affinity and reclaimable pods for the engine."""

from __future__ import annotations

from typing import Any

import pytest

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand.podsets import PodSetDemand, Role, pod_set, shape_key
from rayquota.queueing import NodeSelectorRequirement

TERMS = [
    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["two"]}]},
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
]


def _template(terms: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": terms}
    return {
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        }
    }


def _body(pod_sets: list[dict[str, Any]], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": pod_sets}}
    if status is not None:
        body["status"] = status
    return body


def test_required_node_affinity_is_read_from_the_template() -> None:
    wl = converter.workload(_body([{"name": "main", "count": 1, "template": _template(TERMS)}]))
    # A term of only matchFields names nothing a flavor labels: it stays, empty (it holds anywhere).
    assert wl.pod_sets[0].node_affinity == ((NodeSelectorRequirement("type", "In", ("two",)),), ())


def test_a_malformed_expression_names_the_field_and_value() -> None:
    terms = [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["new"]}]}]
    with pytest.raises(converter.ConversionError) as error:
        converter.workload(_body([{"name": "main", "count": 1, "template": _template(terms)}]))
    assert str(error.value) == (
        "workload ns/w.spec.podSets[0]: template.spec.affinity.nodeAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]."
        "values: operator Gt on key 'gen' needs one integer, got ['new']"
    )


def test_reclaimable_pods_lower_the_counts() -> None:
    pod_sets = [
        {"name": "a", "count": 5, "requests": {"cpu": "1"}},
        {"name": "b", "count": 2, "requests": {"cpu": "1"}},
    ]
    wl = converter.workload(_body(pod_sets, {"reclaimablePods": [{"name": "a", "count": 2}]}))
    assert [ps.count for ps in wl.pod_sets] == [3, 2]
    assert wl.totals() == {"cpu": 5000}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "a", "count": -1}, "reclaimablePods[0].count: must be a whole number >= 0, got -1"),
        ({"name": "a", "count": "2"}, "reclaimablePods[0].count: must be a whole number >= 0, got '2'"),
        ({"count": 1}, "reclaimablePods[0].name: a pod set name is required, got None"),
    ],
)
def test_malformed_reclaimable_pods_name_the_field_and_value(entry: dict[str, Any], words: str) -> None:
    body = _body([{"name": "a", "count": 5, "requests": {"cpu": "1"}}], {"reclaimablePods": [entry]})
    with pytest.raises(converter.ConversionError, match="^workload ns/w.status." + words.replace("[", r"\[")):
        converter.workload(body)


def test_own_workloads_carry_the_affinity_of_their_pod_templates() -> None:
    demand = pod_set("workers", Role.WORKER, 2, _template(TERMS))
    assert demand.node_affinity == tuple(TERMS)
    api = converter.api_pod_set(demand)
    back = converter.workload(_body([api])).pod_sets[0]
    assert back == converter.engine_pod_set(demand)
    assert back.node_affinity[0] == (NodeSelectorRequirement("type", "In", ("two",)),)


def test_affinity_is_part_of_a_pod_sets_shape() -> None:
    plain = PodSetDemand("w", Role.WORKER, 1, {"cpu": 1000})
    pinned = PodSetDemand("w", Role.WORKER, 1, {"cpu": 1000}, node_affinity=tuple(TERMS))
    assert shape_key(plain) != shape_key(pinned)
    assert "template" not in converter.api_pod_set(plain)
