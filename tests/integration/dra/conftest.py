"""The operator with DRA device classes mapped to quota (issue #30), scoped to ``dra-*``
namespaces, and a DRA driver played by the tests: DeviceClasses selecting its devices by CEL,
a ResourceSlice per kwok GPU node (full GPUs on the A100 nodes, MIG partitions on the H100
nodes), so that the real kube-scheduler allocates the claims of the pods it places."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gate_invariants import COVERED
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import (  # noqa: F401 (fixtures)
    Quota,
    gate_sampler,
    gpu_rayjob,
    kube,
    quota,
    running_operator,
)
from tests.integration.ray.kubehelpers import Kube

DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
MIG_CLASS = "mig-1g.10gb.example.com"
GPU_RESOURCE = "example.com/gpu"
MIG_RESOURCE = "example.com/mig-1g"
MAPPINGS = [
    {"name": GPU_RESOURCE, "deviceClassNames": [GPU_CLASS]},
    {"name": MIG_RESOURCE, "deviceClassNames": [MIG_CLASS]},
]
DEVICE_CLASSES = {GPU_CLASS: GPU_RESOURCE, MIG_CLASS: MIG_RESOURCE}
DEVICES_PER_NODE = 4
# The nodes of the default kwok pools (rayquota/localcluster/nodes.py) the driver publishes on.
FULL_GPU_NODES = ("gpu-a100-0", "gpu-a100-1")
MIG_NODES = ("gpu-h100-0", "gpu-h100-1")


@pytest.fixture
def namespace_prefix() -> str:
    return "dra"


def device_class(name: str, kind: str, profile: str | None = None) -> dict[str, Any]:
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "{kind}"'
    if profile:
        expression += f' && device.attributes["{DRIVER}"].profile == "{profile}"'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def resource_slice(node: str, mig: bool) -> dict[str, Any]:
    """What a GPU driver publishes for ``node``: one pool of full GPUs, or of 1g.10gb MIG
    partitions (a pool of its own, named after the node and the kind)."""
    kind = "mig" if mig else "gpu"
    devices = []
    for index in range(DEVICES_PER_NODE):
        attributes: dict[str, Any] = {"type": {"string": kind}, "index": {"int": index}}
        if mig:
            attributes |= {"profile": {"string": "1g.10gb"}, "productName": {"string": "H100"}}
        else:
            attributes |= {"productName": {"string": "A100-SXM4-80GB"}}
        memory = "10Gi" if mig else "80Gi"
        devices.append(
            {"name": f"{kind}-{index}", "attributes": attributes, "capacity": {"memory": {"value": memory}}}
        )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{kind}.{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": f"{node}-{kind}", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def driver_objects() -> list[dict[str, Any]]:
    return [
        device_class(GPU_CLASS, "gpu"),
        device_class(MIG_CLASS, "mig", "1g.10gb"),
        *(resource_slice(node, mig=False) for node in FULL_GPU_NODES),
        *(resource_slice(node, mig=True) for node in MIG_NODES),
    ]


@pytest.fixture(scope="package")
def dra_operator(crds_installed: None, control_plane: Any) -> Iterator[Path]:
    objects = driver_objects()
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    env = {"RAYQUOTA_DEVICE_CLASS_MAPPINGS": json.dumps(MAPPINGS)}
    try:
        with running_operator("dra", env) as dashboard_map:
            yield dashboard_map
    finally:
        for obj in reversed(objects):
            kind = f"{obj['kind'].lower()}s.resource.k8s.io"
            control_plane.kubectl("delete", kind, obj["metadata"]["name"], "--wait=false", check=False)


@pytest.fixture
def dra_sampler(gate_sampler: Any) -> Any:  # noqa: F811 (the queue folder's fixture)
    """The queue folder's gate sampler (``start(cluster_queue, pool)``) that also counts the
    devices allocated to live pods' claims, mapped to their quota resource."""

    def start(cluster_queue: str, pool: str | None = "a100") -> GateSampler:
        covered = (*COVERED, GPU_RESOURCE, MIG_RESOURCE)
        return gate_sampler(cluster_queue, pool, covered=covered, device_classes=DEVICE_CLASSES)  # type: ignore[no-any-return]

    return start


def claim_template(name: str, count: int, device_class: str = GPU_CLASS) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": device_class, "count": count}}
                    ]
                }
            }
        },
    }


def group_with_claims(group: dict[str, Any], template: str) -> dict[str, Any]:
    """A worker group whose pods ask for devices through a ResourceClaimTemplate instead of
    nvidia.com/gpu."""
    spec = group["template"]["spec"]
    for container in spec["containers"]:
        for amounts in container["resources"].values():
            amounts.pop("nvidia.com/gpu", None)
        container["resources"]["claims"] = [{"name": "gpus"}]
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    return group


def with_claims(rayjob: dict[str, Any], template: str) -> dict[str, Any]:
    """The RayJob's GPU workers asking through a ResourceClaimTemplate, not nvidia.com/gpu."""
    for group in rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        group_with_claims(group, template)
    return rayjob


def allocated_devices(cluster: Kube, pod: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The devices the scheduler allocated to ``pod``'s claims: (node of the pool, pool, device)."""
    out = []
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        claim = cluster.get("resourceclaims.resource.k8s.io", status.get("resourceClaimName") or "")
        allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            out.append((str(result["driver"]), str(result["pool"]), str(result["device"])))
    return out


def device_queue(objects: Quota, short: str, flavors: Mapping[str, Mapping[str, int]]) -> str:
    """ClusterQueue ``short`` behind LocalQueue ``short``: per flavor, the devices (or GPUs) of
    each resource named (cpu and memory plentiful in each flavor); one resource group."""
    covered = ["cpu", "memory", *dict.fromkeys(r for amounts in flavors.values() for r in amounts)]
    groups = [
        {
            "coveredResources": covered,
            "flavors": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "nominalQuota": 256},
                        {"name": "memory", "nominalQuota": "2Ti"},
                        *({"name": r, "nominalQuota": amounts.get(r, 0)} for r in covered[2:]),
                    ],
                }
                for flavor, amounts in flavors.items()
            ],
        }
    ]
    cq = objects.apply("ClusterQueue", short, {"spec": {"resourceGroups": groups}})
    objects.local_queue(short, cq)
    return cq


def raycluster(name: str, queue: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """A queued RayCluster (the queue label, born suspended) of a 1-CPU head and ``groups``."""
    spec = gpu_rayjob(name, queue, workers=1, gpus_per_worker=1)["spec"]["rayClusterSpec"]
    spec["workerGroupSpecs"] = groups
    spec["suspend"] = True
    labels = {"kueue.x-k8s.io/queue-name": queue}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def gpu_group(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    """A worker group of ``replicas`` workers of ``gpus`` nvidia.com/gpu each."""
    group = gpu_rayjob("x", "x", workers=replicas, gpus_per_worker=gpus)["spec"]["rayClusterSpec"]
    return {**group["workerGroupSpecs"][0], "groupName": name}


def claim_group(name: str, replicas: int, template: str) -> dict[str, Any]:
    """A worker group of ``replicas`` workers whose devices come from ResourceClaimTemplate
    ``template``."""
    return group_with_claims(gpu_group(name, replicas, 1), template)


def admitted_usage(workload: Mapping[str, Any], resource: str) -> int:
    """What ``workload`` is admitted of ``resource`` (whole units)."""
    return sum(
        int(ps.get("resourceUsage", {}).get(resource, "0"))
        for ps in workload["status"]["admission"]["podSetAssignments"]
    )
