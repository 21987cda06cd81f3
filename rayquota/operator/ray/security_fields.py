"""Fields that ask for security (or a sidecar) rayquota does not provide: refused, never ignored.

A RayCluster spec that asks for network isolation (``networkPolicy``), mutual TLS
(``tlsOptions``), Kubernetes-delegated token auth (``authOptions.enableK8sTokenAuth``) or the
history server's collector (``historyServerOptions``) must not run without it. KubeRay v1.7.0
refuses the first, second and fourth while their feature gates are off, as they are by default
(``RayClusterNetworkPolicy``, ``RayClusterMTLS``, ``RayClusterHistoryServer``): any value, even
``tlsOptions.enabled: false``. It implements ``enableK8sTokenAuth`` without a gate but only on a
RayCluster in token mode; rayquota does not implement it, so it is refused everywhere, with
KubeRay's own reason first where KubeRay refuses it too. rayquota cannot turn those gates on
(feature_gates.py refuses them at start-up), so these refusals hold whatever the settings say.

The same spec is checked wherever it is written (a RayCluster, a RayJob's ``rayClusterSpec``, a
RayService's ``rayClusterConfig``, a RayCronJob's template), by the reconcilers (ValidationFailed
and a Warning event; nothing is created) and by the admission webhook for queued objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Field (in a RayCluster spec) -> why rayquota refuses it when present.
GATED_FIELDS: Mapping[str, str] = {
    "networkPolicy": (
        "rayquota creates no NetworkPolicies, so the cluster would run without the isolation it asks for "
        "(KubeRay v1.7.0 refuses it too unless its RayClusterNetworkPolicy feature gate is on)"
    ),
    "tlsOptions": (
        "rayquota does not set up mutual TLS between Ray pods, so the cluster would run unencrypted "
        "(KubeRay v1.7.0 refuses it too unless its RayClusterMTLS feature gate is on)"
    ),
    "historyServerOptions": (
        "rayquota runs no history server collector, so the cluster's logs and events would not be "
        "collected (KubeRay v1.7.0 refuses it too unless its RayClusterHistoryServer feature gate is on)"
    ),
}
K8S_TOKEN_AUTH_NOT_IMPLEMENTED = (
    "rayquota does not implement Kubernetes-delegated token auth, so the cluster would run without the "
    "authentication it asks for; use authOptions.mode: token without it (a Secret's token)"
)


def _k8s_token_auth_reason(cluster_spec: Mapping[str, Any], owner_kind: str) -> str:
    """KubeRay's reason where KubeRay refuses the field too, else rayquota's own."""
    options = cluster_spec.get("authOptions") or {}
    if options.get("mode") != "token":
        return "it needs authOptions.mode: token (KubeRay's rule), and " + K8S_TOKEN_AUTH_NOT_IMPLEMENTED
    if owner_kind in ("RayJob", "RayService"):
        return f"KubeRay does not support it for a {owner_kind}, and " + K8S_TOKEN_AUTH_NOT_IMPLEMENTED
    if options.get("secretName"):
        return "it cannot be used with authOptions.secretName (KubeRay's rule), and " + (
            K8S_TOKEN_AUTH_NOT_IMPLEMENTED
        )
    return K8S_TOKEN_AUTH_NOT_IMPLEMENTED


def refusals(cluster_spec: Mapping[str, Any], prefix: str, owner_kind: str = "RayCluster") -> list[str]:
    """One message per refused field set in ``cluster_spec``, each naming the field by its path
    (``prefix`` is where the spec sits in the object) and saying why."""
    errors = [
        f"{prefix}.{name} is refused: {why}"
        for name, why in GATED_FIELDS.items()
        if cluster_spec.get(name) is not None
    ]
    options = cluster_spec.get("authOptions")
    if isinstance(options, Mapping) and options.get("enableK8sTokenAuth") is True:
        reason = _k8s_token_auth_reason(cluster_spec, owner_kind)
        errors.append(f"{prefix}.authOptions.enableK8sTokenAuth: true is refused: {reason}")
    return errors


# Where a RayCluster spec sits in each kind that carries one.
CLUSTER_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",),
    "RayJob": ("spec", "rayClusterSpec"),
    "RayService": ("spec", "rayClusterConfig"),
    "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec"),
}


def object_refusals(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """The refusals for a whole object of ``kind`` (empty for a kind without a cluster spec). A
    RayCronJob's template is refused as the RayJobs it would make."""
    path = CLUSTER_SPEC_PATHS.get(kind)
    if path is None:
        return []
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return []
    owner = "RayJob" if kind == "RayCronJob" else kind
    return refusals(node, ".".join(path), owner)
