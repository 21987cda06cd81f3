"""Fields that ask for security (or a sidecar) rayquota does not provide: refused, never ignored.

A RayCluster spec that asks for network isolation (``networkPolicy``), mutual TLS
(``tlsOptions``) or the history server's collector (``historyServerOptions``) must not run without
it. KubeRay v1.7.0 refuses the three while their feature gates are off, as they are by default
(``RayClusterNetworkPolicy``, ``RayClusterMTLS``, ``RayClusterHistoryServer``): any value, even
``tlsOptions.enabled: false``. rayquota cannot turn the last two gates on (feature_gates.py refuses
them at start-up), so those refusals hold whatever the settings say. ``networkPolicy`` is
implemented (networkpolicy.py) and allowed when the RayClusterNetworkPolicy gate is on.
Kubernetes-delegated token auth (``authOptions.enableK8sTokenAuth``) is implemented on a RayCluster
(auth_token.py) and refused on a RayJob or a RayService, as KubeRay refuses it there.

The same spec is checked wherever it is written (a RayCluster, a RayJob's ``rayClusterSpec``, a
RayService's ``rayClusterConfig``, a RayCronJob's template), by the reconcilers (ValidationFailed
and a Warning event; nothing is created) and by the admission webhook for queued objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

from rayquota.operator.ray.builders import auth_token

# A refused value is shown up to this many characters (a NetworkPolicy's rules can be long).
SHOWN_VALUE_CHARS = 80

# Field (in a RayCluster spec) -> why rayquota refuses it when present.
GATED_FIELDS: Mapping[str, str] = {
    "networkPolicy": (
        "the RayClusterNetworkPolicy feature gate is off (KubeRay v1.7.0's default), so no NetworkPolicies "
        "are made and the cluster would run without the isolation it asks for; KubeRay refuses it too"
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


def _k8s_token_auth_refusal(owner_kind: str) -> str | None:
    """KubeRay implements Kubernetes-delegated token auth on a RayCluster only (auth_token)."""
    if owner_kind in ("RayJob", "RayService"):
        return (
            f"KubeRay does not support Kubernetes token auth for a {owner_kind} (its validation refuses it)"
        )
    return None


# The feature gate that turns each implemented field on (KubeRay v1.7.0's name).
FIELD_GATES: Mapping[str, str] = {"networkPolicy": "RayClusterNetworkPolicy"}


def allowed_fields(gate_enabled: Callable[[str], bool]) -> frozenset[str]:
    """The gated fields whose gate is on (and which rayquota implements)."""
    return frozenset(field for field, gate in FIELD_GATES.items() if gate_enabled(gate))


def refusals(
    cluster_spec: Mapping[str, Any],
    prefix: str,
    owner_kind: str = "RayCluster",
    allowed: Collection[str] = (),
) -> list[str]:
    """One message per refused field set in ``cluster_spec``, each naming the field by its path
    (``prefix`` is where the spec sits in the object) and its value, and saying why. ``allowed``: gated fields
    whose feature gate is on (allowed_fields)."""
    errors = [
        f"{prefix}.{name} is refused (set to {shown(cluster_spec[name])}): {why}"
        for name, why in GATED_FIELDS.items()
        if cluster_spec.get(name) is not None and name not in allowed
    ]
    options = cluster_spec.get("authOptions")
    reason = _k8s_token_auth_refusal(owner_kind)
    if isinstance(options, Mapping) and options.get("enableK8sTokenAuth") is True and reason:
        errors.append(f"{prefix}.authOptions.enableK8sTokenAuth: true is refused: {reason}")
    return errors


def shown(value: Any) -> str:
    """A refused value as the user wrote it (JSON), cut short past SHOWN_VALUE_CHARS."""
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


# Where a RayCluster spec sits in each kind that carries one.
CLUSTER_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",),
    "RayJob": ("spec", "rayClusterSpec"),
    "RayService": ("spec", "rayClusterConfig"),
    "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec"),
}


def object_refusals(kind: str, obj: Mapping[str, Any], allowed: Collection[str] = ()) -> list[str]:
    """The refusals for a whole object of ``kind`` (empty for a kind without a cluster spec), with
    KubeRay's token auth rules (auth_token.validation_errors): what the admission webhook refuses.
    A RayCronJob's template is refused as the RayJobs it would make. ``allowed``: as for
    :func:`refusals`."""
    path = CLUSTER_SPEC_PATHS.get(kind)
    if path is None:
        return []
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return []
    owner = "RayJob" if kind == "RayCronJob" else kind
    prefix = ".".join(path)
    # Token auth asked for in a way KubeRay refuses (no token mode, an old Ray, both a Secret and
    # Kubernetes tokens) is refused at admission too, not only by the reconciler.
    return refusals(node, prefix, owner, allowed) + auth_token.validation_errors(node, prefix)
