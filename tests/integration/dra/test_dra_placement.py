"""DRA RayClusters on the local control plane with the real scheduler allocating devices: charged,
gated and placed like nvidia.com/gpu ones, beside them in one cluster and one queue, and MIG
partitions as a flavor of their own. The sampler counts the devices allocated to live pods'
claims against what is admitted, at every state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.dra.conftest import (
    FULL_GPU_NODES,
    GPU_RESOURCE,
    MIG_CLASS,
    MIG_NODES,
    MIG_RESOURCE,
    admitted_usage,
    allocated_devices,
    claim_group,
    claim_template,
    device_queue,
    gpu_group,
    raycluster,
)
from tests.integration.queue.conftest import Quota, admitted_workload, workload_of
from tests.integration.ray.kubehelpers import Kube, running, wait_for
from tests.polling import holds


def workers(kube: Kube, cluster: str, group: str | None = None) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.pods(cluster)
        if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
        and group in (None, p["metadata"]["labels"].get("ray.io/group"))
    ]


def pending_reason(kube: Kube, cluster: str) -> str:
    return str(
        ((workload_of(kube, "RayCluster", cluster) or {}).get("status") or {}).get("pendingReason") or ""
    )


def test_a_dra_raycluster_is_charged_gated_and_placed_like_an_nvidia_gpu_one(
    dra_operator: Path, kube: Kube, quota: Quota, dra_sampler: Any
) -> None:
    a100 = quota.flavor("a100", "a100")
    cq = device_queue(quota, "team", {a100: {"nvidia.com/gpu": 4, GPU_RESOURCE: 4}})
    sampler = dra_sampler(cq)
    kube.apply(claim_template("two-gpus", 2))
    kube.apply(raycluster("dra", "team", [claim_group("gpu", 2, "two-gpus")]))
    kube.apply(raycluster("nv", "team", [gpu_group("gpu", 2, 2)]))
    dra, nv = admitted_workload(kube, "RayCluster", "dra"), admitted_workload(kube, "RayCluster", "nv")
    # Charged alike: 2 workers x 2 devices, each on its own resource, on the same flavor.
    assert admitted_usage(dra, GPU_RESOURCE) == admitted_usage(nv, "nvidia.com/gpu") == 4
    assert admitted_usage(dra, "nvidia.com/gpu") == admitted_usage(nv, GPU_RESOURCE) == 0
    assert [
        {k.replace(GPU_RESOURCE, "nvidia.com/gpu"): v for k, v in ps["flavors"].items()}
        for ps in dra["status"]["admission"]["podSetAssignments"]
    ] == [ps["flavors"] for ps in nv["status"]["admission"]["podSetAssignments"]]
    for cluster in ("dra", "nv"):
        wait_for(
            f"{cluster}'s head and 2 workers Running",
            lambda c=cluster: len(running(kube.pods(c))) == 3,
            timeout_s=120,
        )
    # Placed: the flavor's nodes, where the scheduler allocated each worker its 2 devices.
    for pod in workers(kube, "dra"):
        devices = allocated_devices(kube, pod)
        assert len(devices) == 2 and {pool for _, pool, _ in devices} == {f"{pod['spec']['nodeName']}-gpu"}
        assert pod["spec"]["nodeName"] in FULL_GPU_NODES
    # Gated: over quota, the next DRA cluster waits without pods, its reason naming the resource.
    kube.apply(raycluster("late", "team", [claim_group("gpu", 1, "two-gpus")]))
    wait_for("the late cluster's reason", lambda: GPU_RESOURCE in pending_reason(kube, "late"))
    holds("the late cluster without pods", lambda: kube.pods("late") == [], seconds=3)
    # Released only once the first cluster's pods are gone (the sampler judges the order).
    kube.kubectl("delete", "raycluster", "dra", "--wait=false")
    wait_for(
        "the late cluster's worker Running", lambda: len(running(workers(kube, "late"))) == 1, timeout_s=120
    )
    assert len(allocated_devices(kube, workers(kube, "late")[0])) == 2
    sampler.assert_holds()
    assert sampler.ever("ResourceClaim", lambda c: bool((c.get("status") or {}).get("allocation")))


def test_a_cluster_of_a_dra_group_and_an_nvidia_gpu_group_grows_only_with_quota(
    dra_operator: Path, kube: Kube, quota: Quota, dra_sampler: Any
) -> None:
    a100 = quota.flavor("a100", "a100")
    cq = device_queue(quota, "team", {a100: {"nvidia.com/gpu": 2, GPU_RESOURCE: 2}})
    sampler = dra_sampler(cq)
    kube.apply(claim_template("two-gpus", 2))
    body = raycluster("mixed", "team", [claim_group("dra", 1, "two-gpus"), gpu_group("nv", 1, 2)])
    kube.apply(body)
    wl = admitted_workload(kube, "RayCluster", "mixed")
    assert (admitted_usage(wl, GPU_RESOURCE), admitted_usage(wl, "nvidia.com/gpu")) == (2, 2)
    wait_for(
        "the head and both workers Running", lambda: len(running(kube.pods("mixed"))) == 3, timeout_s=120
    )
    [dra_worker] = workers(kube, "mixed", "dra")
    [nv_worker] = workers(kube, "mixed", "nv")
    assert len(allocated_devices(kube, dra_worker)) == 2 and allocated_devices(kube, nv_worker) == []
    # The DRA group grows (as the autoscaler grows it): the slice waits for example.com/gpu.
    groups = body["spec"]["workerGroupSpecs"]
    groups[0]["replicas"] = 2
    kube.patch("raycluster", "mixed", {"spec": {"workerGroupSpecs": groups}})
    wait_for("the grown slice waiting", lambda: GPU_RESOURCE in pending_reason(kube, "mixed"))
    holds("one DRA worker only", lambda: len(workers(kube, "mixed", "dra")) == 1, seconds=3)
    device_queue(quota, "team", {a100: {"nvidia.com/gpu": 2, GPU_RESOURCE: 4}})
    wait_for(
        "the second DRA worker Running",
        lambda: len(running(workers(kube, "mixed", "dra"))) == 2,
        timeout_s=120,
    )
    wl = admitted_workload(kube, "RayCluster", "mixed")
    assert (admitted_usage(wl, GPU_RESOURCE), admitted_usage(wl, "nvidia.com/gpu")) == (4, 2)
    sampler.assert_holds()


def test_mig_partitions_and_full_gpus_are_two_flavors(
    dra_operator: Path, kube: Kube, quota: Quota, dra_sampler: Any
) -> None:
    """Full GPUs are quota of the A100 flavor, 1g.10gb MIG partitions of the H100 flavor (whose
    nodes publish them): each group is admitted to the flavor that has its resource, charged on
    it, and its devices are allocated on that flavor's nodes."""
    a100, h100 = quota.flavor("a100", "a100"), quota.flavor("h100", "h100")
    cq = device_queue(quota, "team", {a100: {GPU_RESOURCE: 4}, h100: {MIG_RESOURCE: 4}})
    sampler = dra_sampler(cq, pool=None)  # two flavors: placement is checked below
    kube.apply(claim_template("two-gpus", 2))
    kube.apply(claim_template("one-mig", 1, MIG_CLASS))
    kube.apply(
        raycluster("split", "team", [claim_group("full", 1, "two-gpus"), claim_group("mig", 2, "one-mig")])
    )
    wl = admitted_workload(kube, "RayCluster", "split")
    flavors = {ps["name"]: ps["flavors"] for ps in wl["status"]["admission"]["podSetAssignments"]}
    assert flavors["full"][GPU_RESOURCE] == a100 and flavors["mig"][MIG_RESOURCE] == h100, flavors
    assert (admitted_usage(wl, GPU_RESOURCE), admitted_usage(wl, MIG_RESOURCE)) == (2, 2)
    wait_for("the head and 3 workers Running", lambda: len(running(kube.pods("split"))) == 4, timeout_s=120)
    for pod in workers(kube, "split", "mig"):
        node = pod["spec"]["nodeName"]
        assert node in MIG_NODES and pod["spec"]["nodeSelector"]["rayquota.io/gpu-pool"] == "h100"
        assert [pool for _, pool, _ in allocated_devices(kube, pod)] == [f"{node}-mig"]
    [full] = workers(kube, "split", "full")
    assert full["spec"]["nodeName"] in FULL_GPU_NODES
    assert len(allocated_devices(kube, full)) == 2
    # MIG quota spent: one more MIG worker waits, naming the MIG resource.
    kube.apply(raycluster("more", "team", [claim_group("mig", 3, "one-mig")]))
    wait_for("the MIG cluster's reason", lambda: MIG_RESOURCE in pending_reason(kube, "more"))
    assert kube.pods("more") == []
    sampler.assert_holds()
