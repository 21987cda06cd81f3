"""New pods are pinned to the domains of their group's topology assignment, never beyond a
domain's count, in the assignment's order."""

from __future__ import annotations

from typing import Any

from rayquota.operator.ray.builders.topology_pins import domain_of, pin_created, pinned, pins_for_new_pods

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


def _pod(group: str | None, selector: dict[str, str] | None = None, phase: str = "Pending") -> dict[str, Any]:
    pod_labels = (
        {"ray.io/node-type": "head"}
        if group is None
        else {"ray.io/node-type": "worker", "ray.io/group": group}
    )
    spec: dict[str, Any] = {"containers": []}
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"labels": pod_labels}, "spec": spec, "status": {"phase": phase}}


def test_the_planners_new_pods_are_pinned_group_by_group() -> None:
    creates = [_pod(None), _pod("gpu"), _pod("gpu"), _pod("cpu")]
    live = [_pod("gpu", {HOST: "n1"}), _pod("gpu", {HOST: "n2"}, phase="Succeeded")]
    pinned_pods, waiting = pin_created(
        creates,
        ((({HOST: "n9"}), 1),),
        {"gpu": (({HOST: "n1"}, 1), ({HOST: "n2"}, 1), ({HOST: "n3"}, 1))},
        live,
    )
    assert [p["spec"].get("nodeSelector") for p in pinned_pods] == [
        {HOST: "n9"},
        {HOST: "n2"},  # n1 is taken by a live pod; a finished pod takes no room
        {HOST: "n3"},
        None,  # a group without an assignment is left as it is
    ]
    assert waiting == []


def test_pods_beyond_the_assigned_domains_wait() -> None:
    creates = [_pod("gpu"), _pod("gpu")]
    pinned_pods, waiting = pin_created(creates, None, {"gpu": (({HOST: "n1"}, 1),)}, [])
    assert len(pinned_pods) == 1
    assert waiting == ["worker group 'gpu': its assigned topology domains are full (1 pods wait)"]
