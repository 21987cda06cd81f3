"""New pods are pinned to the domains of their group's topology assignment, never beyond a
domain's count, in the assignment's order."""

from __future__ import annotations

from rayquota.operator.ray.topology_pins import domain_of, pinned, pins_for_new_pods

HOST = "kubernetes.io/hostname"
DOMAINS = [({HOST: "n1"}, 2), ({HOST: "n2"}, 1), ({HOST: "n3"}, 1)]


def test_pods_fill_the_domains_in_order() -> None:
    assert pins_for_new_pods(DOMAINS, [], 3) == [{HOST: "n1"}, {HOST: "n1"}, {HOST: "n2"}]


def test_live_pods_take_their_domains_room() -> None:
    live = [{"nodeSelector": {HOST: "n1", "pool": "a"}}, {"nodeSelector": {HOST: "n2"}}]
    assert pins_for_new_pods(DOMAINS, live, 5) == [{HOST: "n1"}, {HOST: "n3"}]


def test_no_room_no_pin() -> None:
    full = [{"nodeSelector": {HOST: n}} for n in ("n1", "n1", "n2", "n3")]
    assert pins_for_new_pods(DOMAINS, full, 1) == []
    assert pins_for_new_pods([], [], 2) == []


def test_a_pin_keeps_the_templates_own_selector() -> None:
    spec = pinned({"nodeSelector": {"pool": "a"}, "containers": []}, {HOST: "n2"})
    assert spec["nodeSelector"] == {"pool": "a", HOST: "n2"}
    assert domain_of(spec, (HOST,)) == ("n2",)
    assert domain_of({"containers": []}, (HOST,)) is None
