"""Which held pods the admission lets through, and the patches (queue/gating/pod_gate.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.operator.core.gate import Placement
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.caps import NOTHING
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps

A100 = Placement({"gpu": "a100"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},))


def pod(
    name: str, group: str | None = "gpu", *, held: bool = True, gpus: int = 1, **extra: Any
) -> dict[str, Any]:
    labels = {"ray.io/cluster": "svc-a", "ray.io/node-type": "head" if group is None else "worker"}
    if group is not None:
        labels["ray.io/group"] = group
    spec: dict[str, Any] = {
        "containers": [{"name": "ray", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        **extra,
    }
    if held:
        spec["schedulingGates"] = [{"name": pod_gate.SCHEDULING_GATE}]
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z",
            "labels": labels,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def caps(workers: int, head: bool = True, budget_gpus: int | None = None) -> AdmittedCaps:
    budget = None if budget_gpus is None else {"nvidia.com/gpu": budget_gpus * 1000}
    return AdmittedCaps(
        head=head,
        workers={"gpu": workers},
        head_placement=Placement(),
        worker_placements={"gpu": A100},
        budget=budget,
    )


def apply_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 for the operations the gate uses (add, remove, test), enough to check them."""
    out = copy.deepcopy(doc)
    for op in ops:
        steps = [s.replace("~1", "/").replace("~0", "~") for s in op["path"].split("/")[1:]]
        parent: Any = out
        for step in steps[:-1]:
            parent = parent[int(step)] if isinstance(parent, list) else parent[step]
        last = steps[-1]
        if op["op"] == "test":
            assert (parent[int(last)] if isinstance(parent, list) else parent[last]) == op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif isinstance(parent, list):
            parent.append(op["value"]) if last == "-" else parent.insert(int(last), op["value"])
        else:
            assert op["op"] == "add"
            parent[last] = op["value"]
    return out


def names(holding: pod_gate.Holding) -> list[str]:
    return [r.pod["metadata"]["name"] for r in holding.releases]


def test_nothing_admitted_lets_nothing_through() -> None:
    holding = pod_gate.releases(NOTHING, [pod("h", None), pod("w1")])
    assert holding.releases == ()
    assert holding.waiting


def test_a_cluster_under_no_quota_has_all_its_pods_let_through_as_they_are() -> None:
    holding = pod_gate.releases(None, [pod("h", None), pod("w1"), pod("w2", held=False)])
    assert names(holding) == ["h", "w1"]
    assert all(r.placement == Placement() for r in holding.releases)


def test_workers_are_let_through_up_to_the_admitted_count_counting_those_already_through() -> None:
    pods = [pod("h", None), pod("w1", held=False, nodeName="n1"), pod("w2"), pod("w3")]
    holding = pod_gate.releases(caps(workers=2), pods)
    assert names(holding) == ["h", "w2"]
    assert any("covers 2 of its pods" in w for w in holding.waiting)


def test_a_finished_pod_frees_its_place_and_a_deleting_held_pod_is_left_alone() -> None:
    done = pod("w1", held=False)
    done["status"]["phase"] = "Succeeded"
    going = pod("w2")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    holding = pod_gate.releases(caps(workers=1), [done, going, pod("w3")])
    assert names(holding) == ["w3"]


def test_the_budget_bounds_what_is_let_through() -> None:
    pods = [pod("w1", gpus=2), pod("w2", gpus=2)]
    holding = pod_gate.releases(caps(workers=2, budget_gpus=3), pods)
    assert names(holding) == ["w1"]
    assert any("nvidia.com/gpu would exceed" in w for w in holding.waiting)


def test_a_pod_whose_own_node_selector_contradicts_the_flavor_stays_held_and_says_why() -> None:
    holding = pod_gate.releases(caps(workers=1), [pod("w1", nodeSelector={"gpu": "h100"})])
    assert holding.releases == ()
    assert "gpu=h100" in holding.waiting[0]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "x", "operator": "Exists"}]},
        {"schedulingGates": [{"name": "other"}, {"name": pod_gate.SCHEDULING_GATE}]},
    ],
)
def test_the_release_patch_adds_the_placement_and_removes_only_our_gate(extra: dict[str, Any]) -> None:
    held = pod("w1", **extra)
    if "schedulingGates" in extra:
        held["spec"]["schedulingGates"] = extra["schedulingGates"]
    (release,) = pod_gate.releases(caps(workers=1), [held]).releases
    after = apply_patch(held, release.patch())
    assert not pod_gate.gated(after)
    assert after["spec"]["nodeSelector"]["gpu"] == "a100"
    assert A100.carried_by(after["spec"])
    assert {g["name"] for g in after["spec"].get("schedulingGates") or []} == (
        {"other"} if "schedulingGates" in extra else set()
    )
    for key, value in (extra.get("nodeSelector") or {}).items():
        assert after["spec"]["nodeSelector"][key] == value


def test_the_gate_patch_adds_the_gate_once() -> None:
    bare = pod("w1", held=False)
    gated = apply_patch(bare, pod_gate.gate_patch(bare))
    assert pod_gate.gated(gated)
    assert pod_gate.gate_patch(gated) == []
    other = pod("w2", held=False, schedulingGates=[{"name": "other"}])
    both = apply_patch(other, pod_gate.gate_patch(other))
    assert [g["name"] for g in both["spec"]["schedulingGates"]] == ["other", pod_gate.SCHEDULING_GATE]


def test_pods_of_a_group_with_assigned_domains_are_pinned_to_a_domain_with_room() -> None:
    rack = "cloud.provider.com/topology-rack"
    domains = (({rack: "r1"}, 1), ({rack: "r2"}, 2))
    placed = AdmittedCaps(
        head=True,
        workers={"gpu": 3},
        worker_placements={"gpu": A100},
        worker_domains={"gpu": domains},
    )
    running = pod("w0", held=False, nodeSelector={"gpu": "a100", rack: "r1"})
    holding = pod_gate.releases(placed, [running, pod("w1"), pod("w2"), pod("w3")])
    assert [r.placement.node_selector[rack] for r in holding.releases] == ["r2", "r2"]
    assert all(r.placement.node_selector["gpu"] == "a100" for r in holding.releases)
    assert any("covers 3 of its pods" in w for w in holding.waiting)
    # Full domains hold the pod even under the count.
    full = pod_gate.releases(
        placed,
        [
            running,
            pod("x1", held=False, nodeSelector={rack: "r2"}),
            pod("x2", held=False, nodeSelector={rack: "r2"}),
        ],
    )
    assert full.releases == ()
    tight = AdmittedCaps(head=True, workers={"gpu": 3}, worker_domains={"gpu": (({rack: "r1"}, 1),)})
    assert "topology domains are full" in pod_gate.releases(tight, [running, pod("w1")]).waiting[0]


def test_pods_running_without_the_gate_beyond_the_admission_are_named_and_those_covered_are_not() -> None:
    """Pods KubeRay created while the pod webhooks were off run at once: those the recorded
    admission does not cover are said (the ungater posts them as a PodsBeyondQuota Warning);
    held, finished and deleting pods, and pods under no quota, are not."""
    through = [pod("h", None, held=False), pod("w1", held=False), pod("w2", held=False)]
    assert pod_gate.beyond_quota(caps(workers=2), through) == ()
    assert pod_gate.beyond_quota(caps(workers=1), through) == (
        "1 pod(s) of worker group 'gpu' run(s) beyond the admitted quota (it covers 1)",
    )
    assert pod_gate.beyond_quota(NOTHING, through) == (
        "the head run(s) beyond the admitted quota (it covers 0)",
        "2 pod(s) of worker group 'gpu' run(s) beyond the admitted quota (it covers 0)",
    )
    assert pod_gate.beyond_quota(None, through) == ()
    done, going = pod("w3", held=False), pod("w4", held=False)
    done["status"]["phase"] = "Succeeded"
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pod_gate.beyond_quota(caps(workers=2), [*through, done, going, pod("w5")]) == ()
