"""The fake nodes kwok plays: GPU pools and CPU-only nodes, optionally in blocks and racks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
BLOCK_LABEL = "topology.rayquota.io/block"
RACK_LABEL = "topology.rayquota.io/rack"


@dataclass(frozen=True)
class NodePool:
    """A group of identical fake nodes.

    With ``racks`` set the pool is laid out in ``blocks`` (default 1) x ``racks`` racks of
    ``count`` nodes each, named ``<pool>-b<block>-r<rack>-<i>`` and labelled with their block
    (``block_label``, value ``b<block>``) and rack (``rack_label``, value ``b<block>-r<rack>``),
    the levels a Topology names.
    """

    name: str
    count: int
    cpu: str
    memory: str
    gpus: int = 0
    gpu_product: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pods: int = 250
    blocks: int = 0
    racks: int = 0
    block_label: str = BLOCK_LABEL
    rack_label: str = RACK_LABEL

    def node_names(self) -> list[str]:
        return [name for name, _ in self._placed_names()]

    def manifests(self) -> list[dict[str, Any]]:
        return [self._node(name, where) for name, where in self._placed_names()]

    def _placed_names(self) -> list[tuple[str, dict[str, str]]]:
        if not self.racks:
            return [(f"{self.name}-{i}", {}) for i in range(self.count)]
        out: list[tuple[str, dict[str, str]]] = []
        for b in range(max(self.blocks, 1)):
            for r in range(self.racks):
                where = {self.block_label: f"b{b}", self.rack_label: f"b{b}-r{r}"}
                out.extend((f"{self.name}-b{b}-r{r}-{i}", where) for i in range(self.count))
        return out

    def _node(self, name: str, where: dict[str, str]) -> dict[str, Any]:
        resources: dict[str, str] = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            "rayquota.io/node-pool": self.name,
            **where,
            **self.labels,
        }
        taints: list[dict[str, str]] = []
        if self.gpus:
            resources["nvidia.com/gpu"] = str(self.gpus)
            taints.append(dict(GPU_TAINT))
            if self.gpu_product:
                labels["nvidia.com/gpu.product"] = self.gpu_product
                labels["nvidia.com/gpu.count"] = str(self.gpus)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": resources, "allocatable": dict(resources)},
        }


DEFAULT_POOLS: tuple[NodePool, ...] = (
    NodePool(
        name="gpu-a100",
        count=2,
        cpu="64",
        memory="512Gi",
        gpus=8,
        gpu_product="NVIDIA-A100-SXM4-80GB",
        labels={"rayquota.io/gpu-pool": "a100"},
    ),
    NodePool(
        name="gpu-h100",
        count=2,
        cpu="64",
        memory="512Gi",
        gpus=8,
        gpu_product="NVIDIA-H100-80GB-HBM3",
        labels={"rayquota.io/gpu-pool": "h100"},
    ),
    NodePool(name="cpu", count=2, cpu="32", memory="128Gi"),
)


def load_pools(path: Path | None) -> tuple[NodePool, ...]:
    """Read pools from YAML (a list of NodePool fields), or return the defaults.

    Example::

        - {name: gpu-l4, count: 4, cpu: "32", memory: 256Gi, gpus: 4, gpu_product: NVIDIA-L4}
        - {name: cpu, count: 1, cpu: "16", memory: 64Gi}
        # 2 blocks x 2 racks x 4 nodes, labelled topology.rayquota.io/block and .../rack:
        - {name: gpu-h100, count: 4, blocks: 2, racks: 2, cpu: "64", memory: 512Gi, gpus: 8}
    """
    if path is None:
        return DEFAULT_POOLS
    return pools_from(yaml.safe_load(path.read_text()), str(path))


def pools_from(raw: Any, where: str) -> tuple[NodePool, ...]:
    """Pools from a parsed list of NodePool fields (a nodes file, a simulation scenario's nodes)."""
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list of node pools, got {type(raw).__name__}")
    pools = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: pool {i} must be a mapping, got {entry!r}")
        try:
            fields: dict[str, Any] = {k: (str(v) if k in ("cpu", "memory") else v) for k, v in entry.items()}
            pools.append(NodePool(**fields))
        except TypeError as exc:
            raise ValueError(f"{where}: pool {i}: {exc}") from None
    return tuple(pools)


# kwok stages for pods. Nodes use kwok's built-in node stages. Pods become Running and
# Ready at once; pods owned by a Job complete shortly after, unless a test opts out with
# the manual-completion label (then the test drives their status itself).
MANUAL_COMPLETION_LABEL = "rayquota.io/kwok-manual-completion"


def kwok_config() -> str:
    return (Path(__file__).parent / "kwok-stages.yaml").read_text()
