"""Kueue's Workload holds up to 18 pod sets (apis/kueue/v1beta2/workload_types.go, MaxItems=18):
a RayJob with a head and 17 worker groups is one Workload, admitted; one with 18 worker groups
(19 pod sets) is refused with a sentence naming the count, and stays suspended."""

from __future__ import annotations

import copy
from typing import Any

from tests.integration.kueueapi.conftest import KueueQuota
from tests.integration.queue.conftest import gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"


def _rayjob_with_worker_groups(name: str, queue: str, groups: int) -> dict[str, Any]:
    """A RayJob with ``groups`` one-pod CPU worker groups (each its own pod set)."""
    job = gpu_rayjob(name, queue, workers=1, gpus_per_worker=0)
    cluster = job["spec"]["rayClusterSpec"]
    template = cluster["workerGroupSpecs"][0]
    template["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    cluster["workerGroupSpecs"] = []
    for i in range(groups):
        group = copy.deepcopy(template)
        group["groupName"] = f"g{i}"
        cluster["workerGroupSpecs"].append(group)
    return job


def _workload_of(kube: Kube, name: str) -> dict[str, Any] | None:
    for wl in kube.list(WORKLOADS, selector="rayquota.io/owner-kind=rayjob"):
        if wl["metadata"]["labels"].get("rayquota.io/owner-name") == name:
            return wl
    return None


def test_a_head_and_17_worker_groups_are_admitted_18_worker_groups_refused(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    flavor = kueue_quota.kueue_flavor("rf")
    cq = kueue_quota.kueue_cluster_queue("cq", flavor, {"cpu": 64, "memory": "256Gi"})
    kueue_quota.local_queue("lq", cq)

    kube.apply(_rayjob_with_worker_groups("seventeen", "lq", 17))
    admitted = wait_for(
        "the 18-pod-set Workload admitted",
        lambda: (
            (wl := _workload_of(kube, "seventeen")) is not None
            and (condition(wl, "Admitted") or {}).get("status") == "True"
            and wl
        ),
    )
    assert len(admitted["spec"]["podSets"]) == 18
    assignments = admitted["status"]["admission"]["podSetAssignments"]
    assert sorted(a["name"] for a in assignments) == sorted(ps["name"] for ps in admitted["spec"]["podSets"])
    wait_for(
        "the RayJob unsuspended", lambda: (kube.get("rayjob", "seventeen") or {})["spec"]["suspend"] is False
    )

    kube.apply(_rayjob_with_worker_groups("eighteen", "lq", 18))
    refusal = wait_for(
        "a TooManyPodSets event",
        lambda: next((e for e in kube.events("eighteen") if e["reason"] == "TooManyPodSets"), None),
    )
    assert refusal["type"] == "Warning"
    assert "RayJob" in refusal["message"] and "needs 19 pod sets" in refusal["message"]
    assert "at most 18" in refusal["message"]
    job = kube.get("rayjob", "eighteen")
    assert job is not None and job["spec"]["suspend"] is True
    assert _workload_of(kube, "eighteen") is None
