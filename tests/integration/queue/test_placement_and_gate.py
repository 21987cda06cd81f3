"""Flavor placement on H100 nodes, and the gate a user cannot clear by hand."""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.queue.conftest import Quota, admitted_workload, cluster_pods, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for


def test_job_admitted_to_the_h100_flavor_runs_on_h100_nodes_only(
    queue_operator: Path, kube: Kube, quota: Quota, control_plane: object
) -> None:
    a100 = quota.flavor("a100", "a100")
    h100 = quota.flavor("h100", "h100")
    # No A100 GPUs in this queue: the job can only be admitted to H100.
    cq = quota.cluster_queue("team", {a100: 0, h100: 8})
    quota.local_queue("team", cq)
    kube.apply(gpu_rayjob("train", "team", workers=2, gpus_per_worker=4))
    workload = admitted_workload(kube, "RayJob", "train")
    gpu_set = next(ps for ps in workload["status"]["admission"]["podSetAssignments"] if ps["name"] == "gpu")
    assert gpu_set["flavors"]["nvidia.com/gpu"] == h100
    pods = wait_for(
        "the job's 3 pods scheduled",
        lambda: (
            (p := cluster_pods(kube, "train"))
            and len(p) == 3
            and all(x["spec"].get("nodeName") for x in p)
            and p
        ),
        timeout_s=180,
    )
    nodes = {n["metadata"]["name"]: n for n in kube.list("nodes")}
    pool_of_flavor = {a100: "a100", h100: "h100"}
    head_set = next(ps for ps in workload["status"]["admission"]["podSetAssignments"] if ps["name"] == "head")
    for pod in pods:
        node_labels = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        if pod["metadata"]["labels"]["ray.io/node-type"] == "worker":
            assert "H100" in node_labels["nvidia.com/gpu.product"], pod["metadata"]["name"]
        else:
            # The head asks for no GPU: it lands where its own pod set was admitted.
            assert node_labels["rayquota.io/gpu-pool"] == pool_of_flavor[head_set["flavors"]["cpu"]]


def test_clearing_the_gate_by_hand_is_reasserted_and_no_pod_ever_exists(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    quota.a100_team_queue(4)
    kube.apply(gpu_rayjob("greedy", "team", workers=2, gpus_per_worker=4))  # 8 GPUs on a queue of 4
    wait_for(
        "a pending reason",
        lambda: (
            (wl := workload_of(kube, "RayJob", "greedy")) and (wl.get("status") or {}).get("pendingReason")
        ),
    )
    kube.patch("rayjob", "greedy", {"spec": {"suspend": False}})
    deadline = time.monotonic() + 60
    reasserted = False
    while time.monotonic() < deadline:
        assert not [p for p in kube.list("pods")], "a pod exists for a job that was never admitted"
        job = kube.get("rayjob", "greedy") or {}
        events = [e for e in kube.events("greedy") if e["reason"] == "QuotaGateReasserted"]
        if job["spec"]["suspend"] is True and events:
            reasserted = True
            break
        time.sleep(0.2)
    assert reasserted, "the gate was not re-asserted"
    # Whatever the RayJob reconciler created meanwhile never got a pod.
    pod_events = [e for e in kube.list("events") if e["involvedObject"].get("kind") == "Pod"]
    assert not pod_events
    workload = workload_of(kube, "RayJob", "greedy")
    assert workload is not None and not (workload.get("status") or {}).get("admission")
