from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rayquota.localcluster.nodes import DEFAULT_POOLS, MANUAL_COMPLETION_LABEL, kwok_config, load_pools


def _by_name() -> dict[str, dict]:
    return {m["metadata"]["name"]: m for pool in DEFAULT_POOLS for m in pool.manifests()}


def test_default_pools_have_the_documented_shape() -> None:
    nodes = _by_name()
    assert sorted(nodes) == ["cpu-0", "cpu-1", "gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1"]
    a100 = nodes["gpu-a100-0"]
    assert a100["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert a100["status"]["capacity"]["cpu"] == "64"
    assert a100["status"]["capacity"]["memory"] == "512Gi"
    assert a100["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert nodes["gpu-h100-1"]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert a100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cpu = nodes["cpu-0"]
    assert "nvidia.com/gpu" not in cpu["status"]["capacity"]
    assert cpu["status"]["capacity"]["memory"] == "128Gi"
    assert cpu["spec"] == {}
    assert all(n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake" for n in nodes.values())


def test_pools_load_from_yaml(tmp_path: Path) -> None:
    f = tmp_path / "pools.yaml"
    f.write_text(yaml.safe_dump([{"name": "l4", "count": 3, "cpu": 16, "memory": "64Gi", "gpus": 4}]))
    (pool,) = load_pools(f)
    assert pool.node_names() == ["l4-0", "l4-1", "l4-2"]
    assert pool.manifests()[0]["status"]["allocatable"]["cpu"] == "16"


def test_bad_pool_file_names_the_problem(tmp_path: Path) -> None:
    f = tmp_path / "pools.yaml"
    f.write_text(yaml.safe_dump([{"name": "x", "count": 1, "cpu": "1", "memory": "1Gi", "colour": "red"}]))
    with pytest.raises(ValueError, match=r"pool 0: .*colour"):
        load_pools(f)
    f.write_text("name: x\n")
    with pytest.raises(ValueError, match="expected a list"):
        load_pools(f)


def test_kwok_stages_parse_and_respect_manual_completion() -> None:
    stages = list(yaml.safe_load_all(kwok_config()))
    names = [s["metadata"]["name"] for s in stages]
    assert names == ["rayquota-pod-running", "rayquota-job-pod-succeeded", "rayquota-pod-delete"]
    complete = stages[1]["spec"]["selector"]["matchExpressions"]
    assert any(MANUAL_COMPLETION_LABEL in e["key"] and e["operator"] == "DoesNotExist" for e in complete)


def test_the_topology_samples_nodes_file_lays_out_blocks_and_racks() -> None:
    pools = load_pools(Path(__file__).resolve().parents[3] / "samples/queues/topology/nodes.yaml")
    racks = {m["metadata"]["name"]: m["metadata"]["labels"] for m in pools[0].manifests()}
    assert len(racks) == 16
    labels = racks["h100-b1-r0-3"]
    assert labels["topology.rayquota.io/block"] == "b1"
    assert labels["topology.rayquota.io/rack"] == "b1-r0"
    assert labels["kubernetes.io/hostname"] == "h100-b1-r0-3"
    assert labels["rayquota.io/gpu-pool"] == "h100-racks"
    assert pools[1].node_names() == ["cpu-0", "cpu-1"]
