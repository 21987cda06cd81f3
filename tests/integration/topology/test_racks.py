"""Topology-aware admission on racks of kwok GPU nodes: a 4-host worker group with a required
rack lands in one rack (head grouped with it) or waits with the sentence; preferred falls back
to the block; a higher-priority job preempts in the rack that would then fit.

Every pod is checked against its Workload's recorded assignment: created with the nodeSelector
of an assigned node, never more pods on a node than assigned, and bound where it was pinned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import admitted_workload, cluster_pods, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.topology.conftest import HOST, RACK, Racks

GROUP = "kueue.x-k8s.io/podset-group-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def rack_job(
    name: str,
    hosts: int,
    gpus: int = 4,
    *,
    mode: str = REQUIRED,
    grouped: bool = True,
    priority: str | None = None,
) -> dict[str, Any]:
    """A RayJob whose one worker group is ``hosts`` hosts of ``gpus`` GPUs (numOfHosts), head and
    workers asking for one rack together."""
    annotations = {mode: RACK, **({GROUP: "ray"} if grouped else {})}
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.46.0-gpu",
        "resources": {
            "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.46.0",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
    }
    labels = {"kueue.x-k8s.io/queue-name": "team"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {
                        "metadata": {"annotations": dict(annotations)},
                        "spec": {"containers": [head]},
                    },
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 1,
                        "numOfHosts": hosts,
                        "rayStartParams": {},
                        "template": {
                            "metadata": {"annotations": dict(annotations)},
                            "spec": {"containers": [worker]},
                        },
                    }
                ],
            },
        },
    }


def assigned_nodes(workload: dict[str, Any], pod_set: str | None = None) -> dict[str, int]:
    """Pods per node of a Workload's recorded topology assignment (one pod set, or all)."""
    out: dict[str, int] = {}
    for ps in workload["status"]["admission"]["podSetAssignments"]:
        if pod_set is not None and ps["name"] != pod_set:
            continue
        assignment = ps["topologyAssignment"]
        assert assignment["levels"] == [HOST]
        for domain in assignment["domains"]:
            out[domain["values"][0]] = out.get(domain["values"][0], 0) + domain["count"]
    return out


def racks_of(racks: Racks, nodes: dict[str, int]) -> set[str]:
    return {racks.rack_of[n] for n in nodes}


def test_a_required_rack_holds_the_whole_job_or_it_waits_with_the_sentence(
    topology_operator: Path, kube: Kube, racks: Racks
) -> None:
    racks.add("r0", 4)
    racks.add("r1", 4)
    racks.queue(gpus=64)
    kube.apply(rack_job("first", hosts=4))
    first = admitted_workload(kube, "RayJob", "first")
    workers = assigned_nodes(first, "gpu")
    assert sum(workers.values()) == 4 and len(racks_of(racks, workers)) == 1
    head = assigned_nodes(first, "head")
    assert racks_of(racks, head) == racks_of(racks, workers)  # grouped: the head in the same rack
    kube.apply(rack_job("second", hosts=4))
    second = admitted_workload(kube, "RayJob", "second")
    assert racks_of(racks, assigned_nodes(second, "gpu")) == {"b0-r0", "b0-r1"} - racks_of(racks, workers)
    kube.apply(rack_job("third", hosts=4))
    reason = wait_for(
        "the third job's reason",
        lambda: ((workload_of(kube, "RayJob", "third") or {}).get("status") or {}).get("pendingReason"),
    )
    assert reason.startswith(
        "the head of RayJob `third` and worker group `gpu` of RayJob `third` must share one rack; "
        "worker group `gpu` of RayJob `third` alone needs 16 nvidia.com/gpu (4 pods); "
        "the rack with the most room"
    )
    assert reason.endswith("has 0 nvidia.com/gpu free (fits 0 of the pods)")
    third = kube.get("rayjob", "third")
    assert third is not None and third["spec"]["suspend"] is True
    # The first's pods: each created pinned to a node of its assignment, and bound there.
    pods = wait_for(
        "the first job's pods", lambda: len(cluster_pods(kube, "first")) == 5 and cluster_pods(kube, "first")
    )
    assigned = {**assigned_nodes(first)}
    for pod in pods:
        pinned_to = pod["spec"]["nodeSelector"][HOST]
        assert pinned_to in assigned
        assigned[pinned_to] -= 1
    assert all(left == 0 for left in assigned.values())


def test_preferred_falls_back_to_the_block(topology_operator: Path, kube: Kube, racks: Racks) -> None:
    racks.add("r0", 2)
    racks.add("r1", 2)
    racks.queue(gpus=64)
    kube.apply(rack_job("wide", hosts=3, mode=PREFERRED, grouped=False))
    workers = assigned_nodes(admitted_workload(kube, "RayJob", "wide"), "gpu")
    assert sum(workers.values()) == 3
    assert racks_of(racks, workers) == {"b0-r0", "b0-r1"}  # no rack of 2 nodes holds 3 hosts


def test_preemption_frees_the_rack_that_would_then_fit(
    topology_operator: Path, kube: Kube, racks: Racks, quota: Any
) -> None:
    racks.add("r0", 4)
    racks.add("r1", 4)
    racks.queue(gpus=64, preemption={"withinClusterQueue": "LowerPriority"})
    low = quota.apply("WorkloadPriorityClass", "low", {"value": 1})
    high = quota.apply("WorkloadPriorityClass", "high", {"value": 100})
    # Two low-priority jobs fill rack r0 (the tightest fit for the second), one takes 4 GPUs of r1.
    kube.apply(rack_job("low-a", hosts=2, grouped=False, priority=low))
    a = assigned_nodes(admitted_workload(kube, "RayJob", "low-a"), "gpu")
    kube.apply(rack_job("low-b", hosts=2, grouped=False, priority=low))
    b = assigned_nodes(admitted_workload(kube, "RayJob", "low-b"), "gpu")
    assert racks_of(racks, a) == racks_of(racks, b) == {"b0-r0"}
    kube.apply(rack_job("low-c", hosts=1, grouped=False, priority=low))
    c = assigned_nodes(admitted_workload(kube, "RayJob", "low-c"), "gpu")
    assert racks_of(racks, c) == {"b0-r1"}
    # A whole rack for the high-priority job: evicting low-c (one victim) frees r1; r0 needs two.
    kube.apply(rack_job("high", hosts=4, grouped=False, priority=high))
    preempted = wait_for(
        "low-c preempted",
        lambda: (
            (wl := workload_of(kube, "RayJob", "low-c"))
            and any(
                c["type"] == "Preempted" and c["status"] == "True"
                for c in (wl.get("status") or {}).get("conditions") or ()
            )
        ),
    )
    assert preempted
    winner = assigned_nodes(admitted_workload(kube, "RayJob", "high", timeout_s=90), "gpu")
    assert racks_of(racks, winner) == {"b0-r1"}
    for name in ("low-a", "low-b"):
        kept = workload_of(kube, "RayJob", name) or {}
        assert (kept.get("status") or {}).get("admission"), f"{name} kept its admission"
