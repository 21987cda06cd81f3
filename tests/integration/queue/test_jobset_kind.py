"""JobSets under the queue (jobset.x-k8s.io/v1alpha2, Kueue's ``jobset.x-k8s.io/jobset``).

The test runs its own operator (its own namespace prefix), started before the test installs a
minimal JobSet CRD (``fixtures/jobset-crd.yaml``; JobSet's controller owns the real one): the
operator starts without the CRD, or with it if an earlier run left it, and watches JobSets once
it is served. No JobSet controller runs here, so no Jobs and no pods are created: the test
checks what the queue writes on the JobSet (its gate and each replicatedJob's placement) and
its Workload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import Quota, admitted_workload, running_operator, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for

PREFIX = "qjobset"
CRD = Path(__file__).parent / "fixtures" / "jobset-crd.yaml"
GPU_POOL = "rayquota.io/gpu-pool"
# The operator tries an absent resource again after at most 2 minutes (core/cache/informer.py).
CRD_SEEN_S = 150


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def jobset_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX) as dashboards:
        yield dashboards


def replicated_job(name: str, replicas: int, parallelism: int, gpus: int) -> dict[str, Any]:
    container = {
        "name": "train",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}},
    }
    pod_template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": pod_template}
        },
    }


def gpu_jobset(name: str, queue: str) -> dict[str, Any]:
    """Written unsuspended, as a user who forgot the gate would (no webhook runs here)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "suspend": False,
            "replicatedJobs": [replicated_job("driver", 1, 1, 0), replicated_job("workers", 2, 2, 1)],
        },
    }


def test_a_jobset_waits_suspended_without_quota_and_runs_placed_once_given_it(
    jobset_operator: Path, kube: Kube, quota: Quota, control_plane: Any
) -> None:
    control_plane.kubectl("apply", "-f", str(CRD))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io", "--timeout=60s"
    )
    flavor = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("team", {flavor: 0})  # no GPUs: the JobSet's 4 cannot fit
    quota.local_queue("team", cq)
    kube.apply(gpu_jobset("train", "team"))

    pending = wait_for(
        "the JobSet's Workload pending with a reason",
        lambda: (
            (wl := workload_of(kube, "JobSet", "train"))
            and (wl.get("status") or {}).get("pendingReason")
            and wl
        ),
        timeout_s=CRD_SEEN_S,
    )
    assert "nvidia.com/gpu" in pending["status"]["pendingReason"]
    assert [(ps["name"], ps["count"]) for ps in pending["spec"]["podSets"]] == [("driver", 1), ("workers", 4)]
    wait_for(
        "the unsuspended JobSet suspended by the queue",
        lambda: (js := kube.get("jobset", "train")) is not None and js["spec"]["suspend"] is True and js,
    )
    assert not (workload_of(kube, "JobSet", "train") or {}).get("status", {}).get("admission")

    quota.cluster_queue("team", {flavor: 8})
    admitted = admitted_workload(kube, "JobSet", "train", timeout_s=60)
    assert admitted["status"]["admission"]["clusterQueue"] == cq

    def placed() -> dict[str, Any] | None:
        js = kube.get("jobset", "train")
        return js if js is not None and js["spec"]["suspend"] is False else None

    running = wait_for("the admitted JobSet unsuspended", placed, timeout_s=30)
    for replicated in running["spec"]["replicatedJobs"]:
        pod_spec = replicated["template"]["spec"]["template"]["spec"]
        assert pod_spec["nodeSelector"][GPU_POOL] == "a100", replicated["name"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec[
            "tolerations"
        ]
