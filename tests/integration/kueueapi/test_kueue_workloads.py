"""Kueue-shaped objects (kueue.x-k8s.io/v1beta2) admitted by rayquota in Kueue-API mode, with status in
Kueue's shapes, and Kueue's eviction contract as its perf runner relies on it."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"


def _is(obj: dict[str, Any] | None, type_: str, status: str) -> bool:
    return (condition(obj, type_) or {}).get("status") == status


def _workload_when(kube: Kube, name: str, type_: str, status: str = "True") -> dict[str, Any]:
    return wait_for(
        f"Workload {name} {type_}={status}",
        lambda: (wl := kube.get(WORKLOADS, name)) is not None and _is(wl, type_, status) and wl,
    )


def _status_of(control_plane: Any, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    args = ["get", resource, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return dict(json.loads(control_plane.kubectl(*args).stdout).get("status") or {})


def test_standalone_workload_admitted_with_kueue_shaped_status(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota, control_plane: Any
) -> None:
    flavor = kueue_quota.kueue_flavor("rf")
    cq = kueue_quota.kueue_cluster_queue("cq", flavor, {"cpu": 4})
    kueue_quota.local_queue("lq", cq)
    kube.apply(kueue_workload("first", "lq", "1"))
    admitted = _workload_when(kube, "first", "Admitted")
    assert admitted["status"]["admission"] == {
        "clusterQueue": cq,
        "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "1"}}
        ],
    }
    assert _is(admitted, "QuotaReserved", "True") and "pendingReason" not in admitted["status"]
    # Written by server-side apply as Kueue's admission manager, so Kueue's tools can clear it.
    shown = json.loads(kube.kubectl("get", WORKLOADS, "first", "-o", "json", "--show-managed-fields").stdout)
    managers = {
        (m["manager"], m["operation"], m.get("subresource")) for m in shown["metadata"]["managedFields"]
    }
    assert ("kueue-admission", "Apply", "status") in managers

    cq_status = wait_for(
        "ClusterQueue status with the usage",
        lambda: (
            (s := _status_of(control_plane, "clusterqueues.kueue.x-k8s.io", cq)).get("reservingWorkloads")
            == 1
            and s
        ),
    )
    assert cq_status["flavorsUsage"] == [
        {"name": flavor, "resources": [{"name": "cpu", "total": "1", "borrowed": "0"}]}
    ]
    assert _is({"status": cq_status}, "Active", "True") and cq_status["pendingWorkloads"] == 0
    lq_status = wait_for(
        "LocalQueue status",
        lambda: (
            (s := _status_of(control_plane, "localqueues.kueue.x-k8s.io", "lq", kube.ns)).get(
                "admittedWorkloads"
            )
            == 1
            and s
        ),
    )
    assert lq_status["flavorsUsage"] == [{"name": flavor, "resources": [{"name": "cpu", "total": "1"}]}]

    kube.apply(kueue_workload("second", "lq", "4"))
    pending = _workload_when(kube, "second", "QuotaReserved", "False")
    assert "cpu" in condition(pending, "QuotaReserved")["message"]  # type: ignore[index]
    assert not pending["status"].get("admission")

    # The perf runner's way to finish a Workload: the Finished condition. Its quota comes back.
    conditions = admitted["status"]["conditions"] + [
        {
            "type": "Finished",
            "status": "True",
            "reason": "ByTest",
            "message": "By test runner",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    kube.patch_status(WORKLOADS, "first", {"status": {"conditions": conditions}})
    second = _workload_when(kube, "second", "Admitted")
    assert second["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "4"}


def _clear_admission_as_kueue_runner(kube: Kube, workload: dict[str, Any]) -> None:
    """What Kueue's perf runner does to an evicted Workload: apply, as kueue-admission, the status
    without admission and with QuotaReserved=False."""
    keep = [c for c in workload["status"]["conditions"] if c["type"] in ("Evicted", "Preempted")]
    now = "2026-01-01T00:00:00Z"
    conditions = keep + [
        {
            "type": t,
            "status": "False",
            "reason": "Pending",
            "message": "Evicted by the test runner",
            "lastTransitionTime": now,
        }
        for t in ("QuotaReserved", "Admitted")
    ]
    manifest = {
        "apiVersion": workload["apiVersion"],
        "kind": "Workload",
        "metadata": {"name": workload["metadata"]["name"], "namespace": kube.ns},
        "status": {"conditions": conditions},
    }
    kube.kubectl(
        "apply",
        "--server-side",
        "--subresource=status",
        "--field-manager=kueue-admission",
        "--force-conflicts",
        "-f",
        "-",
        input=yaml.safe_dump(manifest),
    )


def test_preempted_workload_holds_its_quota_until_its_admission_is_cleared(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    flavor = kueue_quota.kueue_flavor("rf")
    cq = kueue_quota.kueue_cluster_queue(
        "cq", flavor, {"cpu": 4}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    kueue_quota.local_queue("lq", cq)
    kube.apply(kueue_workload("low", "lq", "4", priority=50))
    _workload_when(kube, "low", "Admitted")
    kube.apply(kueue_workload("high", "lq", "4", priority=200))
    evicted = _workload_when(kube, "low", "Evicted")
    assert condition(evicted, "Evicted")["reason"] == "Preempted"  # type: ignore[index]
    assert _is(evicted, "Preempted", "True") and evicted["status"]["admission"]["clusterQueue"] == cq
    # Until whoever runs it clears the admission, the victim's quota is held: high waits.
    high = kube.get(WORKLOADS, "high")
    assert high is not None and not (high.get("status") or {}).get("admission")

    _clear_admission_as_kueue_runner(kube, evicted)
    cleared = kube.get(WORKLOADS, "low")
    assert cleared is not None and "admission" not in cleared["status"], (
        "the runner's apply removes our admission"
    )
    admitted = _workload_when(kube, "high", "Admitted")
    assert admitted["status"]["admission"]["clusterQueue"] == cq
    low = _workload_when(kube, "low", "Requeued")
    assert not low["status"].get("admission") and _is(low, "QuotaReserved", "False")
    # Kueue's: a preemption requeues at once, with the Evicted condition's reason and message.
    requeued, evicted_now = condition(low, "Requeued") or {}, condition(low, "Evicted") or {}
    assert (requeued.get("reason"), requeued.get("message")) == ("Preempted", evicted_now.get("message"))
