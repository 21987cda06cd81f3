"""Flavor matching by required node affinity, the ``pods`` resource, and reclaimable pods."""

from __future__ import annotations

import pytest

from rayquota.queueing import (
    Admit,
    ClusterQueue,
    Engine,
    FlavorQuotas,
    NodeSelectorRequirement,
    Phase,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from rayquota.queueing.builders import add_queue
from rayquota.queueing.node_affinity import affinity_matches


def _in(key: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, "In", values)


@pytest.mark.parametrize(
    ("requirement", "labels", "matches"),
    [
        (_in("type", "a", "b"), {"type": "b"}, True),
        (_in("type", "a"), {"type": "b"}, False),
        (_in("type", "a"), {}, False),
        (NodeSelectorRequirement("type", "NotIn", ("a",)), {"type": "b"}, True),
        (NodeSelectorRequirement("type", "NotIn", ("a",)), {}, True),
        (NodeSelectorRequirement("type", "NotIn", ("a",)), {"type": "a"}, False),
        (NodeSelectorRequirement("type", "Exists"), {"type": ""}, True),
        (NodeSelectorRequirement("type", "Exists"), {}, False),
        (NodeSelectorRequirement("type", "DoesNotExist"), {}, True),
        (NodeSelectorRequirement("type", "DoesNotExist"), {"type": "a"}, False),
        (NodeSelectorRequirement("gen", "Gt", ("3",)), {"gen": "4"}, True),
        (NodeSelectorRequirement("gen", "Gt", ("3",)), {"gen": "3"}, False),
        (NodeSelectorRequirement("gen", "Lt", ("3",)), {"gen": "2"}, True),
        (NodeSelectorRequirement("gen", "Lt", ("3",)), {"gen": "x"}, False),
    ],
)
def test_requirement_operators(
    requirement: NodeSelectorRequirement, labels: dict[str, str], matches: bool
) -> None:
    assert requirement.matches(labels) is matches


@pytest.mark.parametrize(
    ("operator", "values", "words"),
    [
        ("Near", ("a",), "operator: 'Near' is not one of"),
        ("In", (), "values: operator In on key 'type' needs at least one value"),
        ("Exists", ("a",), "values: operator Exists on key 'type' takes none, got ['a']"),
        ("Gt", ("three",), "values: operator Gt on key 'type' needs one integer, got ['three']"),
    ],
)
def test_malformed_requirement_names_the_field_and_value(
    operator: str, values: tuple[str, ...], words: str
) -> None:
    with pytest.raises(ValueError, match=r"^" + words.replace("[", r"\[").replace("]", r"\]")):
        NodeSelectorRequirement("type", operator, values)


def test_terms_are_ored_and_expressions_anded_on_the_flavors_keys_only() -> None:
    labels = {"type": "two", "zone": "z1"}
    both = ((_in("type", "two"), _in("zone", "z1")),)
    assert affinity_matches(both, labels)
    assert not affinity_matches(((_in("type", "two"), _in("zone", "z2")),), labels)
    assert affinity_matches(((_in("type", "one"),), (_in("zone", "z1"),)), labels)
    # An expression on a key the flavor does not label is left out of the match...
    assert affinity_matches(((_in("type", "two"), _in("gpu", "h100")),), labels)
    # ...and a term left with none holds anywhere, so the whole affinity holds.
    assert affinity_matches(((_in("type", "one"),), (_in("gpu", "h100"),)), labels)
    assert affinity_matches((), labels)


def _engine(*groups: ResourceGroup, flavors: tuple[ResourceFlavor, ...] = ()) -> Engine:
    engine = Engine()
    for flavor in flavors:
        engine.upsert_flavor(flavor)
    add_queue(engine, ClusterQueue("cq", groups), namespace="ns")
    return engine


def _workload(name: str, count: int, **pod_set: object) -> Workload:
    return Workload("ns", name, "q", (PodSet.of("main", count, {"cpu": 1}, **pod_set),))  # type: ignore[arg-type]


def _admitted(engine: Engine) -> dict[str, dict[str, str]]:
    return {d.workload: dict(d.pod_sets[0].flavors) for d in engine.run_cycle() if isinstance(d, Admit)}


TYPED_FLAVORS = (ResourceFlavor("one", {"type": "one"}), ResourceFlavor("two", {"type": "two"}))
TWO_FLAVORS = ResourceGroup(
    ("cpu",),
    (FlavorQuotas("one", {"cpu": ResourceQuota.of(4)}), FlavorQuotas("two", {"cpu": ResourceQuota.of(4)})),
)


def test_required_node_affinity_picks_the_flavor_and_its_absence_waits() -> None:
    engine = _engine(TWO_FLAVORS, flavors=TYPED_FLAVORS)
    engine.add_workload(_workload("to-two", 1, node_affinity=((_in("type", "two"),),)))
    engine.add_workload(_workload("nowhere", 1, node_affinity=((_in("type", "three"),),)))
    assert _admitted(engine) == {"ns/to-two": {"cpu": "two"}}
    status = engine.workload("ns/nowhere")
    assert status is not None and status.phase is Phase.PENDING
    assert "flavor one does not match the required node affinity of pod set main" in status.pending_reason


def test_pod_sets_differing_only_in_affinity_get_their_own_verdicts() -> None:
    """A pod set whose affinity rules every flavor out must not park one without affinity."""
    engine = _engine(TWO_FLAVORS, flavors=TYPED_FLAVORS)
    engine.add_workload(_workload("a-nowhere", 1, node_affinity=((_in("type", "three"),),)))
    engine.add_workload(_workload("b-anywhere", 1))
    assert _admitted(engine) == {"ns/b-anywhere": {"cpu": "one"}}


PODS_AND_CPU = ResourceGroup(
    ("cpu", "pods"), (FlavorQuotas("default", {"cpu": ResourceQuota.of(10), "pods": ResourceQuota.of(4)}),)
)


def test_pods_are_counted_when_the_queue_covers_them() -> None:
    engine = _engine(PODS_AND_CPU, flavors=(ResourceFlavor("default"),))
    engine.add_workload(_workload("three", 3))
    engine.add_workload(_workload("two-more", 2))
    assert _admitted(engine) == {"ns/three": {"cpu": "default", "pods": "default"}}
    assert engine.usage("cq") == {("default", "cpu"): 3000, ("default", "pods"): 3000}
    status = engine.workload("ns/two-more")
    assert status is not None and "pods in flavor default" in status.pending_reason


def test_pods_are_not_asked_where_no_group_covers_them() -> None:
    engine = _engine(TWO_FLAVORS, flavors=TYPED_FLAVORS)
    engine.add_workload(_workload("three", 3))
    assert _admitted(engine) == {"ns/three": {"cpu": "one"}}


def test_scaling_down_frees_the_pods_it_no_longer_runs() -> None:
    engine = _engine(PODS_AND_CPU, flavors=(ResourceFlavor("default"),))
    engine.add_workload(_workload("w", 4))
    assert "ns/w" in _admitted(engine)
    engine.update_workload(_workload("w", 2))
    assert engine.usage("cq") == {("default", "cpu"): 2000, ("default", "pods"): 2000}
    engine.add_workload(_workload("other", 2))
    assert "ns/other" in _admitted(engine)


def test_reclaimable_pods_leave_the_count_never_below_none() -> None:
    workload = Workload("ns", "w", "q", (PodSet.of("a", 5, {"cpu": 1}), PodSet.of("b", 2, {"cpu": 1})))
    reclaimed = workload.after_reclaim({"a": 2, "b": 7, "gone": 1})
    assert [ps.count for ps in reclaimed.pod_sets] == [3, 0]
    assert workload.after_reclaim({"a": 0}) is workload


def test_reclaimable_pods_lower_the_pods_asked() -> None:
    engine = _engine(PODS_AND_CPU, flavors=(ResourceFlavor("default"),))
    engine.add_workload(_workload("w", 6).after_reclaim({"main": 2}))
    decisions = [d for d in engine.run_cycle() if isinstance(d, Admit)]
    assert [(d.workload, d.pod_sets[0].count) for d in decisions] == [("ns/w", 4)]
    assert engine.usage("cq")[("default", "pods")] == 4000
