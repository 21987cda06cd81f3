"""The Ray autoscaler sidecar of the head pod (enableInTreeAutoscaling), as KubeRay injects it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray.vocabulary import labels

AUTOSCALER_CONTAINER = "autoscaler"
# The autoscaler writes its event log where the head's dashboard reads it: one emptyDir, both mounted.
RAY_LOGS_VOLUME = "ray-logs"
RAY_LOGS_MOUNT_PATH = "/tmp/ray"
AUTOSCALER_START_CMD = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)
# Users who replace the args can still run the generated command: `...; $KUBERAY_GEN_AUTOSCALER_START_CMD`.
GENERATED_START_CMD_ENV = "KUBERAY_GEN_AUTOSCALER_START_CMD"
DEFAULT_RESOURCES = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def build_autoscaler_container(ray_image: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The sidecar with the user's autoscalerOptions laid over KubeRay's defaults (env, envFrom and
    volumeMounts are appended; image, pull policy, resources, securityContext, command and args
    replace)."""
    container: dict[str, Any] = {
        "name": AUTOSCALER_CONTAINER,
        "image": options.get("image") or ray_image,
        "imagePullPolicy": options.get("imagePullPolicy") or "IfNotPresent",
        "command": list(options.get("command") or ["/bin/bash", "-c", "--"]),
        "args": list(options.get("args") or [AUTOSCALER_START_CMD]),
        "env": [
            _field_env("RAY_CLUSTER_NAME", f"metadata.labels['{labels.RAY_CLUSTER}']"),
            _field_env("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
            _field_env("RAY_HEAD_POD_NAME", "metadata.name"),
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            {"name": GENERATED_START_CMD_ENV, "value": AUTOSCALER_START_CMD},
            *copy.deepcopy(options.get("env") or []),
        ],
        "resources": copy.deepcopy(options.get("resources") or DEFAULT_RESOURCES),
    }
    for key in ("envFrom", "volumeMounts"):
        if options.get(key):
            container[key] = copy.deepcopy(list(options[key]))
    if options.get("securityContext") is not None:  # even {} replaces the default, as in KubeRay
        container["securityContext"] = copy.deepcopy(options["securityContext"])
    return container
