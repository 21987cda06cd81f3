"""The operator with DRA device classes mapped to quota (issue #30), scoped to ``dra-*``
namespaces, and the DRA objects the tests share: a DeviceClass selecting its driver's devices
by CEL, and per-test ResourceClaimTemplates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.queue.conftest import kube, quota, running_operator  # noqa: F401 (fixtures)

GPU_DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
GPU_RESOURCE = "example.com/gpu"
MAPPINGS = [{"name": GPU_RESOURCE, "deviceClassNames": [GPU_CLASS]}]


@pytest.fixture
def namespace_prefix() -> str:
    return "dra"


@pytest.fixture(scope="package")
def dra_operator(crds_installed: None, control_plane: Any) -> Iterator[Path]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]},
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(device_class))
    env = {"RAYQUOTA_DEVICE_CLASS_MAPPINGS": json.dumps(MAPPINGS)}
    with running_operator("dra", env) as dashboard_map:
        yield dashboard_map


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


def with_claims(rayjob: dict[str, Any], template: str) -> dict[str, Any]:
    """The RayJob's GPU workers asking through a ResourceClaimTemplate, not nvidia.com/gpu."""
    for group in rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        spec = group["template"]["spec"]
        for container in spec["containers"]:
            for amounts in container["resources"].values():
                amounts.pop("nvidia.com/gpu", None)
            container["resources"]["claims"] = [{"name": "gpus"}]
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    return rayjob
