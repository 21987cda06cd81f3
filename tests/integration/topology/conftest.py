"""Racks of kwok GPU nodes for one test, and an operator with waitForPodsReady on.

Each test gets its own racks: kwok nodes named after its namespace, labelled with their block
and rack, carrying a taint of their own (``rayquota.io/test-racks=<namespace>:NoSchedule``)
so no other test's pod lands there, and the flavor that tolerates it. Cluster-scoped objects
(nodes, the Topology, the flavor, the ClusterQueue) are deleted after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.queue.conftest import Quota, quota, running_operator
from tests.integration.ray.kubehelpers import Kube

PREFIX = "tp"
BLOCK = "topology.rayquota.io/block"
RACK = "topology.rayquota.io/rack"
HOST = "kubernetes.io/hostname"
POOL = "rayquota.io/test-racks"
__all__ = ["quota"]  # the queue folder's per-test quota objects, used here too

READINESS = {
    "RAYQUOTA_WAIT_FOR_PODS_READY": "true",
    "RAYQUOTA_PODS_READY_TIMEOUT": "12",
    "RAYQUOTA_REQUEUING_BACKOFF_BASE_SECONDS": "4",
    "RAYQUOTA_REQUEUING_BACKOFF_MAX_SECONDS": "20",
}


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def topology_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX, READINESS) as dashboard_map:
        yield dashboard_map


@pytest.fixture
def kube(control_plane: Any, namespace: str) -> Kube:
    return Kube(control_plane, namespace)


class Racks:
    """kwok GPU nodes in racks for one test, with a Topology, a flavor and a ClusterQueue."""

    def __init__(self, control_plane: Any, namespace: str, quota: Quota) -> None:
        self.cp = control_plane
        self.ns = namespace
        self.quota = quota
        self.nodes: list[str] = []
        self.rack_of: dict[str, str] = {}

    def add(self, rack: str, count: int, gpus: int = 4, block: str = "b0") -> list[str]:
        names = []
        for i in range(count):
            name = f"{self.ns}-{rack}-{i}"
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        HOST: name,
                        BLOCK: block,
                        RACK: f"{block}-{rack}",
                        POOL: self.ns,
                        "type": "kwok",
                    },
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"taints": [{"key": POOL, "value": self.ns, "effect": "NoSchedule"}]},
                "status": {
                    "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                    "allocatable": {
                        "cpu": "32",
                        "memory": "256Gi",
                        "pods": "110",
                        "nvidia.com/gpu": str(gpus),
                    },
                },
            }
            self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(node))
            self.nodes.append(name)
            self.rack_of[name] = f"{block}-{rack}"
            names.append(name)
        return names

    def queue(self, gpus: int, **spec: Any) -> str:
        """Topology, flavor on these nodes, ClusterQueue ``team`` with ``gpus`` GPUs, LocalQueue ``team``."""
        topology = self.quota.apply(
            "Topology",
            "racks",
            {"spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
        )
        flavor = self.quota.apply(
            "ResourceFlavor",
            "racks",
            {
                "spec": {
                    "nodeLabels": {POOL: self.ns},
                    "tolerations": [
                        {"key": POOL, "operator": "Equal", "value": self.ns, "effect": "NoSchedule"}
                    ],
                    "topologyName": topology,
                }
            },
        )
        cq = self.quota.cluster_queue("team", {flavor: gpus}, **spec)
        self.quota.local_queue("team", cq)
        return cq

    def taint(self, nodes: list[str], key: str, effect: str) -> None:
        for node in nodes:
            self.cp.kubectl("taint", "node", node, f"{key}=yes:{effect}", "--overwrite")

    def delete(self) -> None:
        for node in self.nodes:
            self.cp.kubectl("delete", "node", node, "--wait=false", check=False)


@pytest.fixture
def racks(control_plane: Any, namespace: str, quota: Quota) -> Iterator[Racks]:
    r = Racks(control_plane, namespace, quota)
    try:
        yield r
    finally:
        r.delete()
