"""DRA RayJobs under a quota of mapped devices: charged per pod set, and over quota they wait
with a reason naming the mapped resource."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.dra.conftest import GPU_RESOURCE, claim_template, with_claims
from tests.integration.queue.conftest import Quota, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for


def dra_queue(quota: Quota, devices: int) -> str:
    flavor = quota.apply("ResourceFlavor", "dra", {"spec": {}})
    resources = [
        {"name": "cpu", "nominalQuota": 256},
        {"name": "memory", "nominalQuota": "2Ti"},
        {"name": GPU_RESOURCE, "nominalQuota": devices},
    ]
    groups = [
        {
            "coveredResources": ["cpu", "memory", GPU_RESOURCE],
            "flavors": [{"name": flavor, "resources": resources}],
        }
    ]
    cq = quota.apply("ClusterQueue", "team", {"spec": {"resourceGroups": groups}})
    quota.local_queue("team", cq)
    return cq


def admitted(kube: Kube, name: str) -> dict[str, Any] | None:
    wl = workload_of(kube, "RayJob", name)
    return wl if wl and (condition(wl, "Admitted") or {}).get("status") == "True" else None


def test_second_dra_rayjob_over_quota_waits_naming_the_mapped_resource(
    dra_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = dra_queue(quota, 4)
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
    assert GPU_RESOURCE in pending["status"]["pendingReason"]
    second = kube.get("rayjob", "second")
    assert second is not None and second["spec"]["suspend"] is True
