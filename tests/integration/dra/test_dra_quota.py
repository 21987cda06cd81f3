"""DRA RayJobs under a quota of mapped devices: charged per pod set, and over quota they wait
with a reason naming the mapped resource and its DeviceClass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.dra.conftest import GPU_CLASS, GPU_RESOURCE, claim_template, device_queue, with_claims
from tests.integration.queue.conftest import Quota, gpu_rayjob, is_admitted, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for


def admitted(kube: Kube, name: str) -> dict[str, Any] | None:
    wl = workload_of(kube, "RayJob", name)
    return wl if is_admitted(wl) else None


def test_second_dra_rayjob_over_quota_waits_naming_the_resource_and_device_class(
    dra_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = device_queue(quota, "team", {quota.apply("ResourceFlavor", "dra", {"spec": {}}): {GPU_RESOURCE: 4}})
    kube.apply(claim_template("two-gpus", 2))
    kube.apply(with_claims(gpu_rayjob("first", "team", workers=2, gpus_per_worker=1), "two-gpus"))
    first = wait_for("first job's Workload admitted", lambda: admitted(kube, "first"))
    assert first["status"]["admission"]["clusterQueue"] == cq
    workers = next(ps for ps in first["spec"]["podSets"] if ps["count"] == 2)
    requests = (
        workers.get("requests") or workers["template"]["spec"]["containers"][0]["resources"]["requests"]
    )
    stored = kube.get("rayjob", "first") or {}
    stored_template = stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert requests.get(GPU_RESOURCE) == "2", (first["spec"]["podSets"], stored_template)
    kube.apply(with_claims(gpu_rayjob("second", "team", workers=1, gpus_per_worker=1), "two-gpus"))
    pending = wait_for(
        "second job's pending reason",
        lambda: (
            (wl := workload_of(kube, "RayJob", "second"))
            and (wl.get("status") or {}).get("pendingReason")
            and wl
        ),
    )
    reason = pending["status"]["pendingReason"]
    assert f"{GPU_RESOURCE} (DRA DeviceClass {GPU_CLASS})" in reason, reason
    second = kube.get("rayjob", "second")
    assert second is not None and second["spec"]["suspend"] is True
