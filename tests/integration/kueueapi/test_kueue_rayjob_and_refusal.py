"""A RayJob naming a Kueue LocalQueue is gated and admitted through kueue.x-k8s.io objects; and
`rayquota run --queue-api kueue` refuses to start beside a Kueue controller."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tests.integration.kueueapi.conftest import KueueQuota
from tests.integration.queue.conftest import cluster_pods, gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _rayjob_workload(kube: Kube, name: str) -> dict[str, Any] | None:
    for wl in kube.list("workloads.kueue.x-k8s.io", selector="rayquota.io/owner-kind=rayjob"):
        if wl["metadata"]["labels"].get("rayquota.io/owner-name") == name:
            return wl
    return None


def test_rayjob_on_a_kueue_local_queue_is_gated_then_admitted(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    flavor = kueue_quota.kueue_flavor(
        "a100", nodeLabels={"rayquota.io/gpu-pool": "a100"}, tolerations=[GPU_TOLERATION]
    )
    cq = kueue_quota.kueue_cluster_queue("cq", flavor, {"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8})
    kueue_quota.local_queue("team", cq)
    kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
    kube.apply(gpu_rayjob("second", "team", workers=1, gpus_per_worker=4))

    first = wait_for(
        "first RayJob's Kueue Workload admitted",
        lambda: (
            (wl := _rayjob_workload(kube, "first"))
            and (condition(wl, "Admitted") or {}).get("status") == "True"
            and wl
        ),
    )
    assert first["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert first["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert first["status"]["admission"]["clusterQueue"] == cq
    gpus = sum(
        int(ps["resourceUsage"].get("nvidia.com/gpu", "0"))
        for ps in first["status"]["admission"]["podSetAssignments"]
    )
    assert gpus == 8
    # Kueue's PodSet shape: per-pod requests in a template.
    worker = next(ps for ps in first["spec"]["podSets"] if ps["count"] == 2)
    assert worker["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"
    pods = wait_for("first job's 3 pods", lambda: len(p := cluster_pods(kube, "first")) == 3 and p)
    assert all(p["spec"]["nodeSelector"]["rayquota.io/gpu-pool"] == "a100" for p in pods)

    second = wait_for(
        "second RayJob's Workload pending for GPUs",
        lambda: (
            (wl := _rayjob_workload(kube, "second"))
            and (condition(wl, "QuotaReserved") or {}).get("status") == "False"
            and wl
        ),
    )
    assert "nvidia.com/gpu" in condition(second, "QuotaReserved")["message"]  # type: ignore[index]
    job = kube.get("rayjob", "second")
    assert job is not None and job["spec"]["suspend"] is True and not cluster_pods(kube, "second")


KUEUE_LEASE = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "c1f6bfd2.kueue.x-k8s.io"},
    "spec": {"holderIdentity": "kueue-controller-manager-6d4b9_0f7c", "leaseDurationSeconds": 15},
}
KUEUE_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "kueue-controller-manager"},
    "spec": {
        "replicas": 0,
        "selector": {"matchLabels": {"control-plane": "controller-manager"}},
        "template": {
            "metadata": {"labels": {"control-plane": "controller-manager"}},
            "spec": {"containers": [{"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.19.2"}]},
        },
    },
}


@pytest.mark.parametrize("sign", [KUEUE_LEASE, KUEUE_DEPLOYMENT], ids=["lease", "deployment"])
def test_kueue_api_mode_refuses_to_start_beside_a_kueue_controller(
    kube: Kube, control_plane: Any, sign: dict[str, Any]
) -> None:
    kube.apply(sign)
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rayquota.cli",
                "run",
                "--queue-api",
                "kueue",
                "--no-leader-elect",
                "--metrics-port",
                "0",
                "--health-port",
                "0",
                "-n",
                kube.ns,
            ],
            env=dict(os.environ, KUBECONFIG=str(control_plane.kubeconfig)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        kube.kubectl("delete", sign["kind"].lower(), sign["metadata"]["name"], "--wait=false")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "refusing to start in Kueue-API mode" in result.stderr
    assert f"{sign['kind']} {kube.ns}/{sign['metadata']['name']}" in result.stderr
