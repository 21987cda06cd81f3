"""Ray's token authentication (``authOptions.mode: token``), as KubeRay sets it up.

The token lives in a Secret under the key ``auth_token``: one the operator makes per RayCluster
(named after it, owned by it, a random 32 bytes in base64) unless ``authOptions.secretName`` names
the user's own. Every Ray container (head, workers, their ``wait-gcs-ready`` init containers,
the autoscaler sidecar, a RayJob's submitter) gets ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN``
from that Secret; the operator's own dashboard and Serve calls send it as
``x-ray-authorization: Bearer <token>``, as KubeRay's dashboard client does.

KubeRay's Kubernetes-delegated variant (``authOptions.enableK8sTokenAuth: true``, KubeRay v1.6.2's
``common/pod.go``): Ray checks each request's token with the API server (TokenReview and
SubjectAccessReview), so no Secret is made. Every Ray container (and the wait-gcs-ready init
container, the autoscaler, a K8sJobMode submitter) gets ``RAY_AUTH_MODE=token`` and
``RAY_ENABLE_K8S_TOKEN_AUTH=true`` and mounts the pod's projected ServiceAccount token (volume
``ray-token``, at ``/var/run/secrets/ray.io/serviceaccount``). As in KubeRay, the RBAC that lets
those accounts review tokens and write to Ray is the user's (KubeRay's sample shows it); KubeRay
refuses the field on a RayJob or a RayService, needs Ray 2.55.0 and ``mode: token``, and refuses it
with ``secretName`` (validation_errors).
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.ray_v1 import AuthMode
from rayquota.operator.core import Manager
from rayquota.operator.kube import ApiError, Conflict, core_path
from rayquota.operator.ray.vocabulary import labels

AUTH_MODE_ENV = "RAY_AUTH_MODE"
AUTH_TOKEN_ENV = "RAY_AUTH_TOKEN"
K8S_TOKEN_AUTH_ENV = "RAY_ENABLE_K8S_TOKEN_AUTH"
K8S_TOKEN_VOLUME = "ray-token"
K8S_TOKEN_MOUNT_PATH = "/var/run/secrets/ray.io/serviceaccount"
MIN_K8S_TOKEN_AUTH_RAY_VERSION = (2, 55, 0)
TOKEN_KEY = "auth_token"
# The header KubeRay's dashboard client sends (Ray also reads `Authorization`).
TOKEN_HEADER = "x-ray-authorization"
TOKEN_BYTES = 32
MIN_RAY_VERSION = (2, 52, 0)

log = logging.getLogger(__name__)


def enabled(cluster_spec: Mapping[str, Any]) -> bool:
    """Token mode, written out: KubeRay reads a missing ``mode`` as disabled."""
    options = cluster_spec.get("authOptions") or {}
    return isinstance(options, Mapping) and options.get("mode") == AuthMode.TOKEN


def k8s_token_auth(cluster_spec: Mapping[str, Any]) -> bool:
    """``authOptions.enableK8sTokenAuth: true`` (the API server checks the tokens)."""
    options = cluster_spec.get("authOptions") or {}
    return isinstance(options, Mapping) and options.get("enableK8sTokenAuth") is True


def user_secret_name(cluster_spec: Mapping[str, Any]) -> str | None:
    options = cluster_spec.get("authOptions") or {}
    name = options.get("secretName") if isinstance(options, Mapping) else None
    return str(name) if name else None


def secret_name(cluster_name: str, cluster_spec: Mapping[str, Any]) -> str:
    """The user's Secret, else the one the operator makes: the cluster's name (KubeRay's CheckName
    keeps at most 50 characters, the end of a longer name)."""
    return user_secret_name(cluster_spec) or labels.kuberay_trimmed(cluster_name, 50, letter_first=True)


def set_container_env(container: dict[str, Any], cluster_name: str, cluster_spec: Mapping[str, Any]) -> None:
    """RAY_AUTH_MODE and RAY_AUTH_TOKEN (from the Secret), unless the container sets them; with
    Kubernetes-delegated auth RAY_ENABLE_K8S_TOKEN_AUTH and the token's mount instead of the Secret."""
    env = container.setdefault("env", [])
    names = {e.get("name") for e in env}
    if AUTH_MODE_ENV not in names:
        env.append({"name": AUTH_MODE_ENV, "value": AuthMode.TOKEN.value})
    if k8s_token_auth(cluster_spec):
        if K8S_TOKEN_AUTH_ENV not in names:
            env.append({"name": K8S_TOKEN_AUTH_ENV, "value": "true"})
        mounts = container.setdefault("volumeMounts", [])
        if not any(m.get("name") == K8S_TOKEN_VOLUME for m in mounts):
            mounts.append({"name": K8S_TOKEN_VOLUME, "mountPath": K8S_TOKEN_MOUNT_PATH, "readOnly": True})
        return
    if AUTH_TOKEN_ENV not in names:
        ref = {"name": secret_name(cluster_name, cluster_spec), "key": TOKEN_KEY}
        env.append({"name": AUTH_TOKEN_ENV, "valueFrom": {"secretKeyRef": ref}})


def configure_pod(
    pod_spec: dict[str, Any], ray_container: dict[str, Any], cluster: Mapping[str, Any]
) -> None:
    """The Ray container and the wait-gcs-ready init container (it runs `ray health-check`)."""
    spec = cluster.get("spec") or {}
    if not enabled(spec):
        return
    name = str(cluster["metadata"]["name"])
    set_container_env(ray_container, name, spec)
    if k8s_token_auth(spec):
        add_token_volume(pod_spec)
    for init in pod_spec.get("initContainers") or []:
        if init.get("name") == labels.WAIT_GCS_INIT_CONTAINER:
            set_container_env(init, name, spec)


def add_token_volume(pod_spec: dict[str, Any]) -> None:
    """The pod's ServiceAccount token, projected (KubeRay's ``ray-token`` volume), unless the pod
    has a volume of that name."""
    volumes = pod_spec.setdefault("volumes", [])
    if any(v.get("name") == K8S_TOKEN_VOLUME for v in volumes):
        return
    projection = {"serviceAccountToken": {"path": "token"}}
    volumes.append({"name": K8S_TOKEN_VOLUME, "projected": {"sources": [projection]}})


def build_secret(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The per-cluster Secret with a fresh random token, owned by the cluster."""
    meta = cluster["metadata"]
    token = base64.b64encode(secrets.token_bytes(TOKEN_BYTES)).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(str(meta["name"]), cluster.get("spec") or {}),
            "namespace": meta["namespace"],
            "labels": {labels.RAY_CLUSTER: labels.label_value(str(meta["name"]))},
            "ownerReferences": [labels.owner_reference(cluster)],
        },
        "stringData": {TOKEN_KEY: token},
    }


def wants_secret(cluster: Mapping[str, Any]) -> bool:
    spec = cluster.get("spec") or {}
    return enabled(spec) and user_secret_name(spec) is None and not k8s_token_auth(spec)


# --- validation -------------------------------------------------------------------------------

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def validation_errors(cluster_spec: Mapping[str, Any], prefix: str) -> list[str]:
    """KubeRay's rules: token mode needs rayVersion 2.52.0 or later, written out; Kubernetes-
    delegated auth needs token mode, 2.55.0 and no secretName."""
    if not enabled(cluster_spec):
        if k8s_token_auth(cluster_spec):
            mode = f"{prefix}.authOptions.mode"
            return [f"{prefix}.authOptions.enableK8sTokenAuth is true but {mode} is not 'token'"]
        return []
    errors = _version_errors(cluster_spec, prefix, "authOptions.mode is 'token'", MIN_RAY_VERSION)
    if not errors and k8s_token_auth(cluster_spec):
        errors = _version_errors(
            cluster_spec, prefix, "authOptions.enableK8sTokenAuth is true", MIN_K8S_TOKEN_AUTH_RAY_VERSION
        )
        if user_secret_name(cluster_spec):
            errors.append(
                f"{prefix}.authOptions.enableK8sTokenAuth is true and {prefix}.authOptions.secretName "
                f"is set ({user_secret_name(cluster_spec)!r}): the two cannot be used together"
            )
    return errors


def _version_errors(
    cluster_spec: Mapping[str, Any], prefix: str, what: str, minimum: tuple[int, int, int]
) -> list[str]:
    needed = ".".join(str(part) for part in minimum)
    version = str(cluster_spec.get("rayVersion") or "")
    if not version:
        return [f"{prefix}.{what} but {prefix}.rayVersion is not set ({needed} or later)"]
    match = _VERSION.match(version)
    if match is None:
        return [f"{prefix}.{what} but {prefix}.rayVersion {version!r} is not a version"]
    parsed = tuple(int(part or 0) for part in match.groups())
    if parsed < minimum:
        return [f"{prefix}.{what} but {prefix}.rayVersion is {version}: {needed} or later is needed"]
    return []


# --- the operator's own calls -----------------------------------------------------------------


@dataclass
class _Cached:
    token: str
    read_at: float


class AuthTokens:
    """The token of a cluster's Secret, for the operator's dashboard and Serve calls.

    Read with a GET (a watch on every Secret in the watched namespaces would hold them all in
    memory) and kept `ttl_s` seconds, so a polling reconcile does not read it every time.
    """

    def __init__(self, manager: Manager, ttl_s: float = 30.0) -> None:
        self.client = manager.client
        self.recorder = manager.recorder
        self.ttl_s = ttl_s
        self._cache: dict[tuple[str, str], _Cached] = {}
        # Clusters (by uid) whose Secret is known to exist: created once, not read every reconcile.
        self._ensured: set[str] = set()

    async def ensure_secret(self, cluster: Mapping[str, Any]) -> None:
        """Create the cluster's Secret unless the user names one or it exists (409)."""
        uid = str(cluster["metadata"]["uid"])
        if not wants_secret(cluster) or uid in self._ensured:
            return
        secret = build_secret(cluster)
        meta = secret["metadata"]
        try:
            await self.client.create(core_path(meta["namespace"], "secrets"), secret)
        except Conflict:
            pass  # made earlier (by us, before a restart, or by KubeRay): its token stays
        else:
            self.recorder.post(
                cluster,
                "Normal",
                "CreatedSecret",
                f"Created auth token Secret {meta['namespace']}/{meta['name']}",
            )
        self._ensured.add(uid)

    async def token_for(self, cluster: Mapping[str, Any]) -> str | None:
        """None when the cluster does not use token auth. Raises LookupError (with the Secret's
        name) when the Secret or its key is missing."""
        spec = cluster.get("spec") or {}
        if not enabled(spec) or k8s_token_auth(spec):
            return None  # Kubernetes-delegated auth has no Secret (as in KubeRay, nothing is sent)
        meta = cluster["metadata"]
        key = (str(meta["namespace"]), secret_name(str(meta["name"]), spec))
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached.read_at < self.ttl_s:
            return cached.token
        try:
            secret = await self.client.get(core_path(key[0], "secrets", key[1]))
        except ApiError as exc:
            raise LookupError(f"auth token Secret {key[0]}/{key[1]}: {exc.message}") from exc
        if secret is None:
            self._ensured.discard(str(meta["uid"]))  # made again by the next reconcile
            raise LookupError(f"auth token Secret {key[0]}/{key[1]} not found")
        raw = (secret.get("data") or {}).get(TOKEN_KEY)
        if not raw:
            raise LookupError(f"auth token Secret {key[0]}/{key[1]} has no {TOKEN_KEY!r} key")
        token = base64.b64decode(raw).decode()
        self._cache[key] = _Cached(token, time.monotonic())
        return token

    async def headers_for(self, cluster: Mapping[str, Any]) -> dict[str, str]:
        """The header carrying the cluster's token ({} without token auth). A Secret that cannot be
        read leaves the header out: the dashboard's 401 then says what is wrong."""
        try:
            return token_headers(await self.token_for(cluster))
        except LookupError as exc:
            meta = cluster["metadata"]
            log.warning("RayCluster %s/%s: %s", meta["namespace"], meta["name"], exc)
            return {}

    def forget(self, cluster: Mapping[str, Any]) -> None:
        """Drop a cached token (the dashboard refused it: the Secret may have changed)."""
        meta = cluster["metadata"]
        spec = cluster.get("spec") or {}
        self._cache.pop((str(meta["namespace"]), secret_name(str(meta["name"]), spec)), None)


def token_headers(token: str | None) -> dict[str, str]:
    return {TOKEN_HEADER: f"Bearer {token}"} if token else {}
