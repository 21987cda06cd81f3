"""KubeRay's checks of a RayCluster spec's optional features: GCS fault tolerance, autoscaler v2,
token auth, and the security fields rayquota refuses (security_fields). The same spec is checked
wherever it is written (a RayCluster's ``spec``, a RayJob's ``spec.rayClusterSpec``, a RayService's
``spec.rayClusterConfig``), so each message names the field by its path in the object the user
wrote."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rayquota.operator.ray.builders import auth_token, autoscaler_v2, gcs_ft
from rayquota.operator.ray.raycluster import security_fields


def feature_errors(
    cluster_spec: Mapping[str, Any],
    annotations: Mapping[str, str],
    prefix: str,
    owner_kind: str = "RayCluster",
    allowed: Collection[str] = (),
) -> list[str]:
    """``owner_kind``: the kind of the object the spec is written in; ``allowed``: gated fields
    whose feature gate is on."""
    return [
        *security_fields.refusals(cluster_spec, prefix, owner_kind, allowed),
        *gcs_ft.validation_errors(cluster_spec, annotations, prefix),
        *autoscaler_v2.validation_errors(cluster_spec, prefix),
        *auth_token.validation_errors(cluster_spec, prefix),
    ]
