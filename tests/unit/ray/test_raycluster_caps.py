"""The planner under quota: no pod from a template without the admitted placement, misplaced
pods replaced, and the budget held by every pod that holds resources (terminating ones too)."""

from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.core.gate import Placement
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.raycluster.caps import Budget, within_budget
from rayquota.operator.ray.raycluster.plan import plan_cluster
from rayquota.operator.ray.vocabulary import labels
from tests.unit.ray.fixtures import cluster

VERSION = "1.0.0"
A100 = Placement(
    {"rayquota.io/gpu-pool": "a100"},
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
)
M = 1000  # milli-units per unit
GI = 2**30 * M


def placed(body: dict[str, Any]) -> dict[str, Any]:
    """The cluster with the a100 placement in every template (as the queue injects it)."""
    body = copy.deepcopy(body)
    templates = [body["spec"]["headGroupSpec"]["template"]]
    templates += [g["template"] for g in body["spec"]["workerGroupSpecs"]]
    for template in templates:
        spec = template.setdefault("spec", {})
        spec.setdefault("nodeSelector", {}).update(A100.node_selector)
        spec["tolerations"] = [*spec.get("tolerations", []), *map(dict, A100.tolerations)]
    return body


def caps(workers: int = 2, budget: dict[str, int] | None = None) -> AdmittedCaps:
    return AdmittedCaps(
        head=True,
        workers={"gpu": workers},
        head_placement=A100,
        worker_placements={"gpu": A100},
        budget=budget,
    )


def live_pods(body: dict[str, Any], workers: int, *, terminating: int = 0) -> list[dict[str, Any]]:
    """Pods as the builder makes them from ``body``, Running (the last ``terminating`` being deleted)."""
    ctx = PodContext(cluster=body, operator_version=VERSION, spec_hash="")
    pods = [build_head_pod(ctx)]
    pods += [
        build_worker_pod(ctx, body["spec"]["workerGroupSpecs"][0], replica_index=i) for i in range(workers)
    ]
    for i, pod in enumerate(pods):
        pod["metadata"]["name"] = f"p{i}"
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for pod in pods[len(pods) - terminating :]:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return pods


def test_no_pod_is_built_from_a_template_that_lacks_the_admitted_placement() -> None:
    plan = plan_cluster(cluster(), [], VERSION, caps=caps())
    assert plan.create == []
    assert any("the head template lacks" in w and "gpu-pool=a100" in w for w in plan.waiting)
    assert any("worker group 'gpu'" in w and "nvidia.com/gpu" in w for w in plan.waiting)


def test_pods_are_built_once_the_placement_is_in_the_templates() -> None:
    plan = plan_cluster(placed(cluster()), [], VERSION, caps=caps())
    assert len(plan.create) == 3 and plan.waiting == []
    for pod in plan.create:
        assert A100.carried_by(pod["spec"])


def test_live_pods_without_the_admitted_placement_are_replaced_not_left_pending() -> None:
    body = placed(cluster())
    pods = live_pods(cluster(), workers=2)  # built before the placement reached the spec
    plan = plan_cluster(body, pods, VERSION, caps=caps())
    assert sorted(d.pod["metadata"]["name"] for d in plan.delete) == ["p0", "p1", "p2"]
    assert {d.reason for d in plan.delete} == {"Misplaced"}
    # Their replacements wait only for the budget the misplaced pods still hold (none given here).
    assert len(plan.create) == 3


def test_an_unqueued_cluster_keeps_its_pods_wherever_they_run() -> None:
    pods = live_pods(cluster(), workers=2)
    plan = plan_cluster(cluster(), pods, VERSION, caps=None)
    assert plan.delete == [] and plan.create == []


def test_a_new_pod_waits_while_terminating_pods_hold_the_budget() -> None:
    body = placed(cluster())
    # Admitted: head + 2 workers of 1 GPU. Two workers run, one of them terminating (a scale-down
    # or a replaced pod): a third worker (the spec now asks for 3) must wait until it is gone.
    three = copy.deepcopy(body)
    three["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    pods = live_pods(body, workers=2, terminating=1)
    budget = {"nvidia.com/gpu": 2 * M, "cpu": 100 * M, "memory": 100 * GI}
    plan = plan_cluster(three, pods, VERSION, caps=caps(workers=3, budget=budget))
    assert plan.create == []
    assert any("nvidia.com/gpu would exceed the admitted quota" in w for w in plan.waiting)
    # Once the terminating pod is gone, the two missing workers take its place within the budget.
    plan = plan_cluster(three, pods[:-1], VERSION, caps=caps(workers=3, budget=budget))
    assert len(plan.create) == 1


def test_a_shape_change_in_place_never_holds_more_than_the_budget() -> None:
    """2 workers of 2 GPUs run; the template now asks for 4 workers of 1 GPU, admitted as 4 GPUs:
    counts alone would add 2 new workers (6 GPUs), the budget adds none."""
    old = placed(cluster())
    old["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"
    ] = "2"
    new = placed(cluster())
    new["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    new["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 4
    budget = {"nvidia.com/gpu": 4 * M, "cpu": 100 * M, "memory": 100 * GI}
    plan = plan_cluster(new, live_pods(old, workers=2), VERSION, caps=caps(workers=4, budget=budget))
    assert plan.create == []


def test_a_resource_the_admission_does_not_name_may_not_be_requested() -> None:
    budget = Budget({"cpu": 100 * M}, {})
    assert budget.short_of({"cpu": M, "nvidia.com/gpu": M}) == ["nvidia.com/gpu"]
    assert Budget(None, {}).short_of({"nvidia.com/gpu": 10**9}) == []


def test_a_multi_host_replica_fits_whole_or_waits_whole() -> None:
    body = placed(cluster())
    group = body["spec"]["workerGroupSpecs"][0]
    ctx = PodContext(cluster=body, operator_version=VERSION, spec_hash="")
    replica = [build_worker_pod(ctx, group, replica=("r1", host), replica_index=0) for host in range(2)]
    assert all(p["metadata"]["labels"][labels.RAY_WORKER_REPLICA_NAME] == "r1" for p in replica)
    kept, waiting = within_budget(replica, Budget({"nvidia.com/gpu": M, "cpu": 100 * M, "memory": 100 * GI}))
    assert kept == [] and waiting
    kept, waiting = within_budget(
        replica, Budget({"nvidia.com/gpu": 2 * M, "cpu": 100 * M, "memory": 100 * GI})
    )
    assert len(kept) == 2 and waiting == []


def test_placement_says_what_a_spec_lacks() -> None:
    assert A100.missing_from({}) == [
        "nodeSelector rayquota.io/gpu-pool=a100",
        "toleration nvidia.com/gpu (Exists):NoSchedule",
    ]
    spec = {"nodeSelector": {"rayquota.io/gpu-pool": "a100"}, "tolerations": [dict(A100.tolerations[0])]}
    assert A100.carried_by(spec)


def test_status_columns_count_a_quantity_they_cannot_read_as_zero() -> None:
    """A RayCluster stored with an unreadable quantity (before the CRDs checked them, or one
    beyond what can be counted) made every status write fail with a traceback (fuzzing found it);
    the columns count it as 0 and the pods' refusal is reported as usual."""
    from rayquota.operator.ray.raycluster.status import desired_resources

    body = cluster()
    head = body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head.setdefault("resources", {})["requests"] = {"cpu": None, "memory": "1e1000000"}
    totals = desired_resources(body)
    assert totals["cpu"] >= 0 and totals["memory"] >= 0
