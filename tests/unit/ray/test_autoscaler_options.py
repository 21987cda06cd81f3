"""upscalingMode, idleTimeoutSeconds (cluster and group) and worker-group priority reach Ray's
autoscaler as KubeRay v1.7.0 passes them: not through the autoscaler container (its builder
takes only the image and autoscalerOptions' container fields, and the command names the
RayCluster), but through the RayCluster itself, which the autoscaler reads from the API server.
So the RayCluster as stored (pruned by rayquota's CRD, through rayquota's model) must keep them,
and Ray's own reader (the lock's ``ray``) must derive from it what KubeRay's user expects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

from rayquota.api.ray_v1 import RayCluster
from rayquota.operator.ray.builders import autoscaler_v2
from rayquota.operator.ray.builders.autoscaler_sidecar import AUTOSCALER_START_CMD, build_autoscaler_container

CRD = Path(__file__).resolve().parents[3] / "crds" / "ray.io_rayclusters.yaml"


def _group(name: str, priority: int | None, idle_s: int | None) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": name,
        "replicas": 0,
        "minReplicas": 0,
        "maxReplicas": 4,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.41.0",
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                    }
                ]
            }
        },
    }
    if priority is not None:
        group["priority"] = priority
    if idle_s is not None:
        group["idleTimeoutSeconds"] = idle_s
    return group


def cluster(options: dict[str, Any]) -> dict[str, Any]:
    head = {"name": "ray-head", "image": "rayproject/ray:2.41.0", "resources": {"limits": {"cpu": "1"}}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "auto", "namespace": "team"},
        "spec": {
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": {"version": "v2", **options},
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [_group("small", 5, 30), _group("big", 1, None), _group("plain", None, None)],
        },
    }


def _pruned(value: Any, schema: dict[str, Any]) -> Any:
    """What the API server stores of ``value`` under a structural schema: unknown fields dropped."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return value
        if "additionalProperties" in schema and "properties" not in schema:
            return {k: _pruned(v, schema["additionalProperties"]) for k, v in value.items()}
        properties = schema.get("properties") or {}
        return {k: _pruned(v, properties[k]) for k, v in value.items() if k in properties}
    if isinstance(value, list) and "items" in schema:
        return [_pruned(v, schema["items"]) for v in value]
    return value


def stored(body: dict[str, Any]) -> dict[str, Any]:
    """The RayCluster as the autoscaler reads it back: through rayquota's model, then the CRD."""
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = version["schema"]["openAPIV3Schema"]
    through_model = RayCluster.from_body(copy.deepcopy(body)).to_body()
    return {**through_model, "spec": _pruned(through_model["spec"], schema["properties"]["spec"])}


@pytest.mark.parametrize(
    ("mode", "speed"),
    [("Conservative", 1), ("Default", 1000), ("Aggressive", 1000), (None, 1000)],
)
def test_upscaling_mode_reaches_the_autoscaler_as_its_upscaling_speed(mode: str | None, speed: int) -> None:
    options = {} if mode is None else {"upscalingMode": mode}
    body = stored(cluster(options))
    assert body["spec"]["autoscalerOptions"].get("upscalingMode") == mode
    assert _derive_autoscaling_config_from_ray_cr(body)["upscaling_speed"] == speed


def test_idle_timeouts_and_group_priorities_reach_the_autoscaler() -> None:
    body = stored(cluster({"idleTimeoutSeconds": 90}))
    config = _derive_autoscaling_config_from_ray_cr(body)
    assert config["idle_timeout_minutes"] == 1.5  # the cluster's, in minutes
    types = config["available_node_types"]
    assert types["small"]["idle_timeout_s"] == 30.0 and types["small"]["priority"] == 5
    assert types["big"]["priority"] == 1 and "idle_timeout_s" not in types["big"]
    assert "priority" not in types["plain"] and "idle_timeout_s" not in types["plain"]
    # Without the cluster's idleTimeoutSeconds, Ray's default of one minute.
    assert _derive_autoscaling_config_from_ray_cr(stored(cluster({})))["idle_timeout_minutes"] == 1.0


def test_the_container_carries_none_of_them_and_reads_the_cluster_as_kuberays_does() -> None:
    plain = build_autoscaler_container("rayproject/ray:2.41.0", {})
    tuned = build_autoscaler_container(
        "rayproject/ray:2.41.0", {"upscalingMode": "Conservative", "idleTimeoutSeconds": 90, "version": "v2"}
    )
    assert tuned == plain
    assert plain["args"] == [AUTOSCALER_START_CMD]
    assert "--cluster-name $(RAY_CLUSTER_NAME)" in AUTOSCALER_START_CMD
    assert "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)" in AUTOSCALER_START_CMD


def test_a_group_idle_timeout_needs_the_v2_autoscaler_as_in_kuberay() -> None:
    spec = cluster({})["spec"]
    assert autoscaler_v2.validation_errors(spec, "spec") == []
    spec["autoscalerOptions"]["version"] = "v1"
    errors = autoscaler_v2.validation_errors(spec, "spec")
    assert len(errors) == 1 and "workerGroupSpecs[0].idleTimeoutSeconds" in errors[0], errors
