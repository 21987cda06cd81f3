"""Kueue's priority fallback (pkg/controller/jobframework/reconciler.go ``ExtractPriority``): with
no ``kueue.x-k8s.io/priority-class`` label, a job's priority is the value of the PriorityClass
its pod templates name. A RayJob whose head template names a PriorityClass gets its value, the
reference in Kueue v1beta2's shape, and preempts a lower-priority RayJob in its queue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.integration.kueueapi.conftest import KueueQuota
from tests.integration.queue.conftest import gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WORKLOADS = "workloads.kueue.x-k8s.io"


@pytest.fixture
def priority_class(control_plane: Any, namespace: str) -> Iterator[str]:
    """A pod PriorityClass of value 1000, named after the test's namespace."""
    name = f"{namespace}-high"
    manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 1000,
        "description": "high priority Ray jobs",
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "priorityclass", name, "--wait=false", check=False)


def _workload_of(kube: Kube, name: str) -> dict[str, Any] | None:
    for wl in kube.list(WORKLOADS, selector="rayquota.io/owner-kind=rayjob"):
        if wl["metadata"]["labels"].get("rayquota.io/owner-name") == name:
            return wl
    return None


def _admitted(kube: Kube, name: str) -> dict[str, Any]:
    return wait_for(
        f"{name}'s Workload admitted",
        lambda: (
            (wl := _workload_of(kube, name)) is not None
            and (condition(wl, "Admitted") or {}).get("status") == "True"
            and wl
        ),
    )


def test_rayjob_takes_its_pods_priority_class(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota, priority_class: str
) -> None:
    flavor = kueue_quota.kueue_flavor(
        "a100", nodeLabels={"rayquota.io/gpu-pool": "a100"}, tolerations=[GPU_TOLERATION]
    )
    cq = kueue_quota.kueue_cluster_queue(
        "cq",
        flavor,
        {"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8},
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    kueue_quota.local_queue("team", cq)
    kube.apply(gpu_rayjob("low", "team", workers=2, gpus_per_worker=4))
    low = _admitted(kube, "low")
    assert low["spec"]["priority"] == 0 and "priorityClassRef" not in low["spec"]

    high = gpu_rayjob("high", "team", workers=2, gpus_per_worker=4)
    high["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["priorityClassName"] = priority_class
    kube.apply(high)
    workload = wait_for("high's Workload", lambda: _workload_of(kube, "high"))
    assert workload["spec"]["priority"] == 1000
    assert workload["spec"]["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": priority_class,
    }
    # The priority counts: the lower-priority RayJob is preempted for it.
    wait_for(
        "low's Workload preempted",
        lambda: (condition(_workload_of(kube, "low"), "Preempted") or {}).get("status") == "True",
    )
