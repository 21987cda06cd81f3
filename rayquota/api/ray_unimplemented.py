"""KubeRay fields that round-trip through our CRDs but that the operator does not act on.

A KubeRay user's manifest must never lose a field silently: the CRDs keep every field KubeRay's
schema has, and the reconcilers emit one Warning event per object naming what is ignored:
"field X is not implemented and is ignored". Fields read by the Ray autoscaler itself from the
RayCluster (workerGroupSpecs[].priority, idleTimeoutSeconds, autoscalerOptions.upscalingMode)
work without the operator and are not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Field path -> "is it in use" (a field set to its off value is not worth a warning).
_CLUSTER_FIELDS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "spec.historyServerOptions": lambda spec: bool(spec.get("historyServerOptions")),
    "spec.networkPolicy": lambda spec: spec.get("networkPolicy") is not None,
    "spec.tlsOptions": lambda spec: bool((spec.get("tlsOptions") or {}).get("enabled")),
    "spec.gcsFaultToleranceOptions": lambda spec: bool(spec.get("gcsFaultToleranceOptions")),
    "spec.authOptions": lambda spec: (
        (spec.get("authOptions") or {}).get("mode", "token") != "disabled"
        and spec.get("authOptions") is not None
    ),
    "spec.headGroupSpec.enableIngress": lambda spec: bool(
        (spec.get("headGroupSpec") or {}).get("enableIngress")
    ),
    "spec.headGroupSpec.ingressOptions": lambda spec: bool(
        (spec.get("headGroupSpec") or {}).get("ingressOptions")
    ),
}


def unimplemented_cluster_fields(cluster_spec: Mapping[str, Any], prefix: str = "spec") -> list[str]:
    """Paths of the fields set in a RayCluster spec that the operator ignores."""
    return [
        prefix + path.removeprefix("spec") for path, in_use in _CLUSTER_FIELDS.items() if in_use(cluster_spec)
    ]


def unimplemented_fields(obj: Mapping[str, Any]) -> list[str]:
    """For a RayCluster, RayJob or RayService body: the ignored fields that are set, by path."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "RayCluster":
        return unimplemented_cluster_fields(spec)
    if kind == "RayJob" and spec.get("rayClusterSpec"):
        return unimplemented_cluster_fields(spec["rayClusterSpec"], "spec.rayClusterSpec")
    if kind == "RayService" and spec.get("rayClusterConfig"):
        return unimplemented_cluster_fields(spec["rayClusterConfig"], "spec.rayClusterConfig")
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
