"""The sampler's judge catches what it is there to catch: the invariants on hand-made histories."""

from __future__ import annotations

from typing import Any

from tests.gate_invariants import FlavorPlacement, Judge, Version

TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
A100 = FlavorPlacement({"pool": "a100"}, (TOLERATION,))
NODES = {"a100-0": {"pool": "a100"}, "cpu-0": {"pool": "cpu"}}
OWNER = [{"kind": "RayCluster", "name": "rc", "uid": "uid-rc", "controller": True}]


def pod(name: str, gpus: int, *, placed: bool = True, node: str | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}
    if placed:
        spec.update(nodeSelector={"pool": "a100"}, tolerations=[TOLERATION])
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "ownerReferences": OWNER, **meta}, "spec": spec, "status": {}}


def workload(gpus: int | None, **meta: Any) -> dict[str, Any]:
    owner = [{"kind": "RayCluster", "name": "rc", "uid": "uid-rc", "controller": True}]
    status: dict[str, Any] = {}
    if gpus is not None:
        status["admission"] = {
            "podSetAssignments": [{"name": "gpu", "resourceUsage": {"nvidia.com/gpu": str(gpus)}}]
        }
    return {"metadata": {"name": "wl", "ownerReferences": owner, **meta}, "status": status}


def cluster_queue(gpus: int) -> dict[str, Any]:
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    return {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [{"resources": resources}]}]}}


RAYCLUSTER = {"metadata": {"name": "rc", "uid": "uid-rc"}, "spec": {}}


def judged(*writes: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], bool]) -> list[str]:
    """Problems over a history of (kind, object[, deleted]) writes, in order."""
    versions = [
        Version(i, w[0], bool(w[2]) if len(w) > 2 else False, w[1])  # type: ignore[misc]
        for i, w in enumerate([("ClusterQueue", cluster_queue(4)), ("RayCluster", RAYCLUSTER), *writes])
    ]
    judge = Judge("cq", A100, NODES)
    return [p for version, state in judge.replay(versions) for p in judge.judge(version, state)]


def test_a_quiet_history_breaks_nothing() -> None:
    assert judged(("Workload", workload(2)), ("Pod", pod("p", 2, node="a100-0"))) == []


def test_a_pod_before_its_admission_is_caught() -> None:
    problems = judged(("Pod", pod("p", 2)), ("Workload", workload(2)))
    assert any("nvidia.com/gpu 2 > admitted 0" in p for p in problems)


def test_an_admission_shrunk_while_a_pod_terminates_is_caught() -> None:
    terminating = pod("p", 2, node="a100-0", deletionTimestamp="t")
    problems = judged(("Workload", workload(2)), ("Pod", terminating), ("Workload", workload(0)))
    assert any("> admitted 0" in p for p in problems)


def test_a_deleted_objects_admission_counts_while_its_pods_hold() -> None:
    gone = workload(2)
    history = [("Workload", gone), ("Pod", pod("p", 2, node="a100-0")), ("Workload", gone, True)]
    assert judged(*history) == []  # (its quota is still held: the pod is alive)
    # ... but another admission on top of it, while the pod is alive, is quota given twice.
    again = workload(4, name="other")
    assert any(
        "admitted nvidia.com/gpu 6 > nominal quota 4" in p for p in judged(*history, ("Workload", again))
    )


def test_a_pod_without_the_placement_or_on_another_flavors_node_is_caught() -> None:
    problems = judged(("Workload", workload(2)), ("Pod", pod("p", 1, placed=False)))
    assert any("lacks the flavor's nodeSelector" in p for p in problems)
    assert any("lacks the flavor's toleration" in p for p in problems)
    problems = judged(("Workload", workload(2)), ("Pod", pod("q", 1, node="cpu-0")))
    assert any("runs on node cpu-0, not on the flavor's nodes" in p for p in problems)


def test_a_queued_job_unsuspended_before_its_admission_is_caught() -> None:
    job = {
        "metadata": {"name": "train", "uid": "uid-job", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {"suspend": False},
    }
    own = [{"kind": "Job", "name": "train", "uid": "uid-job", "controller": True}]
    problems = judged(("Job", job))
    assert any("queued Job train is unsuspended" in p for p in problems)
    admitted = workload(2, ownerReferences=own)
    assert judged(("Workload", admitted), ("Job", job)) == []
    # Suspended, or not queued at all: nothing to say.
    assert judged(("Job", {**job, "spec": {"suspend": True}})) == []
    assert judged(("Job", {**job, "metadata": {"name": "plain", "uid": "u", "labels": {}}})) == []
    # Finished: its quota given back and its admission cleared, the completed Job unsuspended.
    finished = workload(None, ownerReferences=own)
    finished["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    assert judged(("Workload", finished), ("Job", job)) == []
    pending = workload(None, ownerReferences=own)
    assert any("queued Job train is unsuspended" in p for p in judged(("Workload", pending), ("Job", job)))


def held_at_gate(name: str, gpus: int) -> dict[str, Any]:
    held = pod(name, gpus, placed=False)
    held["spec"]["schedulingGates"] = [{"name": "rayquota.io/admission"}]
    return held


def test_a_pod_held_at_its_scheduling_gate_holds_nothing_and_is_judged_once_let_through() -> None:
    """Beside KubeRay, a cluster's pods exist before their slice is admitted, held at a gate."""
    assert (
        judged(("Workload", workload(2)), ("Pod", held_at_gate("p", 2)), ("Pod", held_at_gate("q", 4))) == []
    )
    # Let through without the placement, or beyond the admission: caught like any other pod.
    through = pod("q", 4, placed=False)
    problems = judged(("Workload", workload(2)), ("Pod", held_at_gate("q", 4)), ("Pod", through))
    assert any("lacks the flavor's nodeSelector" in p for p in problems)
    assert any("nvidia.com/gpu 4 > admitted 2" in p for p in problems)
    # A bound pod holds its node whatever gates it lists.
    bound = held_at_gate("b", 4)
    bound["spec"]["nodeName"] = "a100-0"
    assert any("> admitted 2" in p for p in judged(("Workload", workload(2)), ("Pod", bound)))


# --- DRA: the devices allocated to a live pod's ResourceClaims count as their mapped resource ---

DEVICE_CLASSES = {"gpu.example.com": "example.com/gpu"}


def dra_pod(name: str) -> dict[str, Any]:
    spec = {"containers": [{"resources": {"claims": [{"name": "gpus"}]}}], "nodeName": "a100-0"}
    spec.update(nodeSelector={"pool": "a100"}, tolerations=[TOLERATION])
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "ownerReferences": OWNER},
        "spec": spec,
        "status": {},
    }


def claim(pod_name: str, devices: int) -> dict[str, Any]:
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": devices}}
    results = [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "a100-0", "device": f"gpu-{i}"}
        for i in range(devices)
    ]
    owner = [{"kind": "Pod", "name": pod_name, "uid": f"uid-{pod_name}", "controller": True}]
    return {
        "metadata": {"name": f"{pod_name}-gpus", "ownerReferences": owner},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def dra_workload(devices: int) -> dict[str, Any]:
    wl = workload(0)
    wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"example.com/gpu": str(devices)}
    return wl


def judged_dra(*writes: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], bool]) -> list[str]:
    queue = cluster_queue(4)
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"].append(
        {"name": "example.com/gpu", "nominalQuota": 4}
    )
    versions = [
        Version(i, w[0], bool(w[2]) if len(w) > 2 else False, w[1])  # type: ignore[misc]
        for i, w in enumerate([("ClusterQueue", queue), ("RayCluster", RAYCLUSTER), *writes])
    ]
    judge = Judge("cq", A100, NODES, ("nvidia.com/gpu", "example.com/gpu"), DEVICE_CLASSES)
    return [p for version, state in judge.replay(versions) for p in judge.judge(version, state)]


def test_devices_allocated_to_a_live_pods_claim_count_against_the_admission() -> None:
    assert (
        judged_dra(("Workload", dra_workload(2)), ("Pod", dra_pod("p")), ("ResourceClaim", claim("p", 2)))
        == []
    )
    problems = judged_dra(
        ("Workload", dra_workload(1)), ("Pod", dra_pod("p")), ("ResourceClaim", claim("p", 2))
    )
    assert any("live pods hold example.com/gpu 2 > admitted 1" in p for p in problems), problems


def test_a_claim_outliving_its_pod_holds_nothing_and_an_unallocated_one_nothing_yet() -> None:
    gone = [("Pod", dra_pod("p")), ("ResourceClaim", claim("p", 2)), ("Pod", dra_pod("p"), True)]
    assert judged_dra(("Workload", dra_workload(2)), *gone, ("Workload", dra_workload(0))) == []
    unallocated = claim("q", 2)
    del unallocated["status"]["allocation"]
    assert (
        judged_dra(("Workload", dra_workload(0)), ("Pod", dra_pod("q")), ("ResourceClaim", unallocated)) == []
    )
