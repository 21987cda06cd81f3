"""Ray's autoscaler v2 (``autoscalerOptions.version: v2``), as KubeRay sets it up, and KubeRay's
rules around it.

With in-tree autoscaling on, v2 means ``RAY_enable_autoscaler_v2=true`` on the head's Ray
container and ``restartPolicy: Never`` on the head and every worker (the v2 autoscaler replaces a
failed node rather than have the kubelet restart it); an explicit ``v1`` writes the variable as
``false``. A worker group's ``idleTimeoutSeconds`` is read by the v2 autoscaler only, so KubeRay
refuses it without v2, and so do we.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_v1 import AutoscalerVersion

ENABLE_V2_ENV = "RAY_enable_autoscaler_v2"
GENERATED_START_CMD_ENV = "KUBERAY_GEN_AUTOSCALER_START_CMD"
NEVER = "Never"
_TRUE_VALUES = ("1", "true")


def autoscaling(cluster_spec: Mapping[str, Any]) -> bool:
    return bool(cluster_spec.get("enableInTreeAutoscaling"))


def requested_version(cluster_spec: Mapping[str, Any]) -> str | None:
    return (cluster_spec.get("autoscalerOptions") or {}).get("version")


def v2(cluster_spec: Mapping[str, Any]) -> bool:
    """Autoscaling on with version v2: the pods get v2's env and restart policy."""
    return autoscaling(cluster_spec) and requested_version(cluster_spec) == AutoscalerVersion.V2


def configure_pod(
    pod_spec: dict[str, Any], ray_container: dict[str, Any], cluster_spec: Mapping[str, Any], head: bool
) -> None:
    if not autoscaling(cluster_spec):
        return
    version = requested_version(cluster_spec)
    if version == AutoscalerVersion.V2:
        pod_spec["restartPolicy"] = NEVER
    if head and version in (AutoscalerVersion.V1, AutoscalerVersion.V2):
        value = "true" if version == AutoscalerVersion.V2 else "false"
        ray_container.setdefault("env", []).append({"name": ENABLE_V2_ENV, "value": value})


def _head_env(cluster_spec: Mapping[str, Any]) -> dict[str, str]:
    template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    return {str(e.get("name")): str(e.get("value", "")) for e in containers[0].get("env") or []}


def _v2_by_env(cluster_spec: Mapping[str, Any]) -> bool:
    """v2 turned on the way KubeRay before 1.4 did: the variable in the head's env."""
    return _head_env(cluster_spec).get(ENABLE_V2_ENV, "").lower() in _TRUE_VALUES


def validation_errors(cluster_spec: Mapping[str, Any], prefix: str) -> list[str]:
    errors: list[str] = []
    on = autoscaling(cluster_spec)
    version = requested_version(cluster_spec)
    head_env = _head_env(cluster_spec)
    env_path = f"{prefix}.headGroupSpec.template.spec.containers[0].env"
    v2_on = (version == AutoscalerVersion.V2) or _v2_by_env(cluster_spec)
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or []):
        if group.get("idleTimeoutSeconds") is not None and not v2_on:
            errors.append(
                f"{prefix}.workerGroupSpecs[{i}].idleTimeoutSeconds is set "
                f"(group {group.get('groupName')!r}) "
                f"but autoscaler v2 is not enabled: set {prefix}.autoscalerOptions.version to 'v2'"
            )
    if not on and head_env.get(ENABLE_V2_ENV, "").lower() in _TRUE_VALUES:
        errors.append(
            f"{env_path}: {ENABLE_V2_ENV}={head_env[ENABLE_V2_ENV]} "
            f"needs {prefix}.enableInTreeAutoscaling: true"
        )
    if on and version is not None and ENABLE_V2_ENV in head_env:
        errors.append(
            f"{env_path}: {ENABLE_V2_ENV} and {prefix}.autoscalerOptions.version are both set: "
            "use only autoscalerOptions.version"
        )
    if on and version == AutoscalerVersion.V2:
        errors += _restart_policy_errors(cluster_spec, prefix)
    options_env = (cluster_spec.get("autoscalerOptions") or {}).get("env") or []
    if any(e.get("name") == GENERATED_START_CMD_ENV for e in options_env):
        errors.append(
            f"{prefix}.autoscalerOptions.env must not set {GENERATED_START_CMD_ENV}: the operator "
            "writes it into the autoscaler container"
        )
    return errors


def _restart_policy_errors(cluster_spec: Mapping[str, Any], prefix: str) -> list[str]:
    errors = []
    head_template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    policy = (head_template.get("spec") or {}).get("restartPolicy")
    if policy not in (None, "", NEVER):
        errors.append(
            f"{prefix}.headGroupSpec.template.spec.restartPolicy is {policy!r}: "
            "autoscaler v2 needs Never (or unset)"
        )
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or []):
        policy = ((group.get("template") or {}).get("spec") or {}).get("restartPolicy")
        if policy not in (None, "", NEVER):
            errors.append(
                f"{prefix}.workerGroupSpecs[{i}].template.spec.restartPolicy is {policy!r}: "
                "autoscaler v2 needs Never (or unset)"
            )
    return errors
