"""Quota for one test and the queued sample RayCluster: the queue scenario the e2e and leader tests
run (cluster-scoped objects are named after the test's namespace)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.direct_api import get_json

REPO = Path(__file__).resolve().parents[1]
QUEUE = "team-a"  # the LocalQueue samples/ray-cluster.complete.yaml names


class Quota:
    """A flavor, a ClusterQueue with 8 GPUs (cluster-scoped, named after the test's namespace) and
    the LocalQueue the sample names. Created before the chart's webhooks exist, deleted after."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.flavor, self.cluster_queue = f"{namespace}-any", f"{namespace}-cq"

    def create(self) -> None:
        quota = [{"name": "cpu", "nominalQuota": 64}, {"name": "memory", "nominalQuota": "512Gi"}]
        quota.append({"name": "nvidia.com/gpu", "nominalQuota": 8})
        manifests = [
            {"kind": "ResourceFlavor", "metadata": {"name": self.flavor}, "spec": {}},
            {
                "kind": "ClusterQueue",
                "metadata": {"name": self.cluster_queue},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [{"name": self.flavor, "resources": quota}],
                        }
                    ],
                },
            },
            {
                "kind": "LocalQueue",
                "metadata": {"name": QUEUE, "namespace": self.namespace},
                "spec": {"clusterQueue": self.cluster_queue},
            },
        ]
        for manifest in manifests:
            manifest["apiVersion"] = "rayquota.io/v1alpha1"
            self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))

    def delete(self) -> None:
        self.cluster.kubectl(
            "delete", "clusterqueues.rayquota.io", self.cluster_queue, "--wait=false", check=False
        )
        self.cluster.kubectl(
            "delete", "resourceflavors.rayquota.io", self.flavor, "--wait=false", check=False
        )


@pytest.fixture
def quota(control_plane: Any, namespace: str) -> Iterator[Quota]:
    created = Quota(control_plane, namespace)
    created.create()
    try:
        yield created
    finally:
        created.delete()


def sample_cluster(namespace: str, name: str | None = None, gpu_workers: int | None = None) -> dict[str, Any]:
    """samples/ray-cluster.complete.yaml (queued on team-a, autoscaler on), optionally renamed and
    with more GPU workers."""
    sample: dict[str, Any] = yaml.safe_load((REPO / "samples" / "ray-cluster.complete.yaml").read_text())
    sample = copy.deepcopy(sample)
    sample["metadata"]["namespace"] = namespace
    if name:
        sample["metadata"]["name"] = name
    if gpu_workers is not None:
        group = sample["spec"]["workerGroupSpecs"][0]  # 2 GPUs per worker
        group["replicas"] = gpu_workers
        group["maxReplicas"] = max(group["maxReplicas"], gpu_workers)
    return sample


def workload_of(cluster: Any, namespace: str, cluster_name: str) -> dict[str, Any] | None:
    items = (get_json(cluster, "workloads.rayquota.io", "-n", namespace) or {}).get("items") or []
    owned = [
        w for w in items if any(o["name"] == cluster_name for o in w["metadata"].get("ownerReferences") or [])
    ]
    return owned[0] if owned else None


def has_condition(obj: dict[str, Any] | None, kind: str, status: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == status for c in conditions)


def cluster_pods(cluster: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    found = get_json(cluster, "pods", "-n", namespace, "-l", f"ray.io/cluster={name}") or {}
    return list(found.get("items") or [])


def pending_workload(
    cluster: Any, namespace: str, cluster_name: str, because: str = ""
) -> dict[str, Any] | None:
    """The cluster's Workload once an admission cycle has looked at it and left it waiting
    (QuotaReserved False, with `because` in the reason when given), else None."""
    workload = workload_of(cluster, namespace, cluster_name)
    reason = str(((workload or {}).get("status") or {}).get("pendingReason") or "")
    looked_at = reason and not reason.startswith("waiting for the next admission cycle")
    waiting = has_condition(workload, "QuotaReserved", "False") and looked_at and because in reason
    return workload if waiting else None


def admitted_workload(cluster: Any, namespace: str, cluster_name: str) -> dict[str, Any] | None:
    """The cluster's Workload once it is admitted, else None."""
    workload = workload_of(cluster, namespace, cluster_name)
    return workload if has_condition(workload, "Admitted", "True") else None
