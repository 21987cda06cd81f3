"""KubeRay fields that round-trip through our CRDs but that the operator does not act on.

A KubeRay user's manifest must never lose a field silently: the CRDs keep every field KubeRay's
schema has, and the reconcilers emit one Warning event per object naming what is ignored:
"field X is not implemented and is ignored". docs/kuberay-compatibility.md lists the same fields,
and a test walks KubeRay v1.7.0's types to check that every field is declared and either
implemented or listed here. Fields read by the Ray autoscaler itself from the RayCluster
(workerGroupSpecs[].priority, idleTimeoutSeconds, autoscalerOptions.upscalingMode) work without
the operator and are not listed. Fields that ask for security rayquota does not provide
(networkPolicy, tlsOptions, authOptions.enableK8sTokenAuth, historyServerOptions) are not warned
but refused (rayquota.operator.ray.raycluster.security_fields).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def _head(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return spec.get("headGroupSpec") or {}


# Field path -> "is it set in a way we ignore" (a field set to its off value is not worth a warning).
_CLUSTER_FIELDS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    # Only read with enableIngress, in KubeRay too.
    "spec.headGroupSpec.ingressOptions": lambda spec: (
        bool(_head(spec).get("ingressOptions")) and not _head(spec).get("enableIngress")
    ),
}

# RayService fields outside its cluster config.
_SERVICE_FIELDS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    # KubeRay does not use a custom serve Service with incremental upgrades (traffic goes through
    # per-cluster Services and the Gateway), and neither do we.
    "spec.serveService": lambda spec: (
        bool(spec.get("serveService"))
        and (spec.get("upgradeStrategy") or {}).get("type") == "NewClusterWithIncrementalUpgrade"
    ),
    # Deprecated in KubeRay, which ignores them too (kuberay#1685); kept so old manifests apply.
    "spec.serviceUnhealthySecondThreshold": lambda spec: (
        spec.get("serviceUnhealthySecondThreshold") is not None
    ),
    "spec.deploymentUnhealthySecondThreshold": lambda spec: (
        spec.get("deploymentUnhealthySecondThreshold") is not None
    ),
}

IGNORED_FIELD_PATHS: tuple[str, ...] = (*_CLUSTER_FIELDS, *_SERVICE_FIELDS)
"""Every field that may be warned about, as a path in a RayCluster (or RayService) spec; on a
RayJob or RayCronJob, the same RayCluster paths under its cluster spec."""


def unimplemented_cluster_fields(cluster_spec: Mapping[str, Any], prefix: str = "spec") -> list[str]:
    """Paths of the fields set in a RayCluster spec that the operator ignores."""
    return [
        prefix + path.removeprefix("spec") for path, in_use in _CLUSTER_FIELDS.items() if in_use(cluster_spec)
    ]


def _unimplemented_rayjob_fields(rayjob_spec: Mapping[str, Any], prefix: str) -> list[str]:
    cluster_spec = rayjob_spec.get("rayClusterSpec")
    if not cluster_spec:
        return []
    return unimplemented_cluster_fields(cluster_spec, f"{prefix}.rayClusterSpec")


def unimplemented_fields(obj: Mapping[str, Any]) -> list[str]:
    """For a RayCluster, RayJob, RayService or RayCronJob body: the ignored fields that are set, by
    path. A RayCronJob's job template becomes each RayJob's spec unchanged, so what a RayJob
    ignores is ignored in the template too."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "RayCluster":
        return unimplemented_cluster_fields(spec)
    if kind == "RayJob":
        return _unimplemented_rayjob_fields(spec, "spec")
    if kind == "RayCronJob":
        return _unimplemented_rayjob_fields(spec.get("jobTemplate") or {}, "spec.jobTemplate")
    if kind == "RayService":
        ignored = [path for path, in_use in _SERVICE_FIELDS.items() if in_use(spec)]
        if spec.get("rayClusterConfig"):
            ignored += unimplemented_cluster_fields(spec["rayClusterConfig"], "spec.rayClusterConfig")
        return ignored
    return []


def unimplemented_warning(obj: Mapping[str, Any]) -> str | None:
    """The Warning event's message, or None when every field set is implemented."""
    fields = unimplemented_fields(obj)
    if not fields:
        return None
    if len(fields) == 1:
        return f"field {fields[0]} is not implemented and is ignored"
    return f"fields {', '.join(fields)} are not implemented and are ignored"


UNIMPLEMENTED_FIELD_REASON = "UnimplementedField"
