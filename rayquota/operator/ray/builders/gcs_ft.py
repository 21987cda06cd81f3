"""GCS fault tolerance with an external Redis, as KubeRay sets it up (pure functions).

Two ways to turn it on, both KubeRay's: ``spec.gcsFaultToleranceOptions`` (the Redis address, a
username and password from a Secret, the storage namespace), or the older annotation
``ray.io/ft-enabled: "true"`` with ``RAY_REDIS_ADDRESS`` in the head's env and ``redis-password``
in its ``rayStartParams``. The head learns where to keep the GCS tables; workers wait longer for a
restarted GCS before giving up. When such a cluster is deleted, a Job removes its keys from Redis
(redis_cleanup.py runs it behind the ``ray.io/gcs-ft-redis-cleanup-finalizer``).

KubeRay's embedded store (``backend: rocksdb``) sits behind a KubeRay feature gate that is off by
default, so KubeRay refuses it; we refuse it the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_v1 import GcsFaultToleranceBackend
from rayquota.operator.ray.vocabulary import labels

EXTERNAL_STORAGE_NAMESPACE_ANNOTATION = "ray.io/external-storage-namespace"

REDIS_ADDRESS_ENV = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD_ENV = "REDIS_PASSWORD"
REDIS_USERNAME_ENV = "REDIS_USERNAME"
STORAGE_NAMESPACE_ENV = "RAY_external_storage_namespace"
RECONNECT_TIMEOUT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
# Ray's default is 60 s; a new head often needs longer, and a worker that gives up exits.
WORKER_RECONNECT_TIMEOUT_S = "600"


def _options(spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    options = spec.get("gcsFaultToleranceOptions")
    return options if isinstance(options, Mapping) else None


def _annotations(cluster: Mapping[str, Any]) -> Mapping[str, str]:
    return cluster["metadata"].get("annotations") or {}


def enabled(cluster: Mapping[str, Any]) -> bool:
    """gcsFaultToleranceOptions is set (even empty), or the ray.io/ft-enabled annotation is "true"."""
    if _options(cluster.get("spec") or {}) is not None:
        return True
    return str(_annotations(cluster).get(labels.FT_ENABLED_ANNOTATION, "")).lower() == "true"


def embedded(spec: Mapping[str, Any]) -> bool:
    options = _options(spec)
    return options is not None and options.get("backend") == GcsFaultToleranceBackend.ROCKSDB


def uses_redis(cluster: Mapping[str, Any]) -> bool:
    """FT on with the Redis backend: the head needs Redis settings and deletion a cleanup Job."""
    return enabled(cluster) and not embedded(cluster.get("spec") or {})


def storage_namespace(cluster: Mapping[str, Any]) -> str:
    """Where in Redis the cluster's GCS tables live: the option, else the annotation, else the
    RayCluster's uid (unique, so two clusters never share tables)."""
    options = _options(cluster.get("spec") or {}) or {}
    if options.get("externalStorageNamespace"):
        return str(options["externalStorageNamespace"])
    annotated = _annotations(cluster).get(EXTERNAL_STORAGE_NAMESPACE_ANNOTATION)
    if annotated is not None:
        return str(annotated)
    return str(cluster["metadata"].get("uid") or "")


def head_start_params(cluster: Mapping[str, Any]) -> dict[str, str]:
    """``ray start`` parameters the head gets: the Redis credentials read from the env at start."""
    options = _options(cluster.get("spec") or {})
    if not uses_redis(cluster) or options is None:
        return {}
    params: dict[str, str] = {}
    if options.get("redisUsername") is not None:
        params["redis-username"] = f"${REDIS_USERNAME_ENV}"
    if options.get("redisPassword") is not None:
        params["redis-password"] = f"${REDIS_PASSWORD_ENV}"
    return params


def _has_env(container: Mapping[str, Any], name: str) -> bool:
    return any(e.get("name") == name for e in container.get("env") or [])


def _credential_env(name: str, credential: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if credential.get("valueFrom") is not None:
        entry["valueFrom"] = copy.deepcopy(credential["valueFrom"])
    else:
        entry["value"] = str(credential.get("value") or "")
    return entry


def configure_pod(
    pod_annotations: dict[str, str], container: dict[str, Any], cluster: Mapping[str, Any], node_type: str
) -> None:
    """The ft-enabled annotation on the head, and the env of the Ray container."""
    on = enabled(cluster)
    if node_type == labels.HEAD_NODE:
        pod_annotations[labels.FT_ENABLED_ANNOTATION] = str(on).lower()
    if not on:
        return
    env = container.setdefault("env", [])
    if node_type == labels.WORKER_NODE:
        if not _has_env(container, RECONNECT_TIMEOUT_ENV):
            env.append({"name": RECONNECT_TIMEOUT_ENV, "value": WORKER_RECONNECT_TIMEOUT_S})
        return
    if not uses_redis(cluster):
        return
    namespace = storage_namespace(cluster)
    pod_annotations[EXTERNAL_STORAGE_NAMESPACE_ANNOTATION] = namespace
    if not _has_env(container, STORAGE_NAMESPACE_ENV):
        env.append({"name": STORAGE_NAMESPACE_ENV, "value": namespace})
    options = _options(cluster.get("spec") or {})
    if options is not None:
        env.append({"name": REDIS_ADDRESS_ENV, "value": str(options.get("redisAddress") or "")})
        if options.get("redisUsername") is not None:
            env.append(_credential_env(REDIS_USERNAME_ENV, options["redisUsername"]))
        if options.get("redisPassword") is not None:
            env.append(_credential_env(REDIS_PASSWORD_ENV, options["redisPassword"]))
        return
    # The annotation form: a password written into rayStartParams still reaches the cleanup Job.
    params = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams") or {}
    if "redis-password" in params and not _has_env(container, REDIS_PASSWORD_ENV):
        env.append({"name": REDIS_PASSWORD_ENV, "value": str(params["redis-password"])})


# --- validation -------------------------------------------------------------------------------


def validation_errors(
    cluster_spec: Mapping[str, Any], annotations: Mapping[str, str], prefix: str
) -> list[str]:
    """KubeRay's GCS fault-tolerance rules, each naming the field (``prefix`` is the path of the
    RayCluster spec: ``spec``, ``spec.rayClusterSpec`` or ``spec.rayClusterConfig``)."""
    errors: list[str] = []
    options = _options(cluster_spec)
    head = cluster_spec.get("headGroupSpec") or {}
    params = head.get("rayStartParams") or {}
    containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    head_container = containers[0]
    where = f"{prefix}.headGroupSpec.template.spec.containers[0].env"
    if annotations.get(labels.FT_ENABLED_ANNOTATION) and options is not None:
        errors.append(
            f"metadata.annotations[{labels.FT_ENABLED_ANNOTATION}] and {prefix}.gcsFaultToleranceOptions are "
            f"both set: use only {prefix}.gcsFaultToleranceOptions to configure GCS fault tolerance"
        )
    annotated_on = str(annotations.get(labels.FT_ENABLED_ANNOTATION, "")).lower() == "true"
    if options is None and not annotated_on and _has_env(head_container, REDIS_ADDRESS_ENV):
        errors.append(
            f"{where}: {REDIS_ADDRESS_ENV} is set, which implicitly enables GCS fault tolerance, but "
            f"{prefix}.gcsFaultToleranceOptions is not set: set it to enable GCS fault tolerance"
        )
    if options is not None:
        errors += _options_errors(options, params, head_container, annotations, prefix, where)
    if params.get("redis-username") or _has_env(head_container, REDIS_USERNAME_ENV):
        errors.append(
            f"{prefix}.headGroupSpec: a Redis username in rayStartParams or the {REDIS_USERNAME_ENV} env "
            f"is not supported: use {prefix}.gcsFaultToleranceOptions.redisUsername"
        )
    return errors


def _options_errors(
    options: Mapping[str, Any],
    params: Mapping[str, str],
    head_container: Mapping[str, Any],
    annotations: Mapping[str, str],
    prefix: str,
    env_path: str,
) -> list[str]:
    errors: list[str] = []
    field = f"{prefix}.gcsFaultToleranceOptions"
    if options.get("backend") == GcsFaultToleranceBackend.ROCKSDB:
        return [
            f"{field}.backend 'rocksdb' (the embedded GCS store) needs KubeRay's "
            "GCSFaultToleranceEmbeddedStorage feature gate, which is off by default and not "
            "implemented here: use the 'redis' backend"
        ]
    if options.get("storage") is not None:
        errors.append(f"{field}.storage applies only to the 'rocksdb' backend, not to 'redis'")
    if not options.get("redisAddress"):
        errors.append(f"{field}.redisAddress must be set (host:port of the Redis server)")
    if params.get("redis-password"):
        errors.append(
            f"{prefix}.headGroupSpec.rayStartParams[redis-password] cannot be set with {field}: "
            f"use {field}.redisPassword"
        )
    for env_name, replacement in (
        (REDIS_PASSWORD_ENV, "redisPassword"),
        (REDIS_ADDRESS_ENV, "redisAddress"),
    ):
        if _has_env(head_container, env_name):
            errors.append(f"{env_path}: {env_name} cannot be set with {field}: use {field}.{replacement}")
    if annotations.get(EXTERNAL_STORAGE_NAMESPACE_ANNOTATION):
        errors.append(
            f"metadata.annotations[{EXTERNAL_STORAGE_NAMESPACE_ANNOTATION}] cannot be set with {field}: "
            f"use {field}.externalStorageNamespace"
        )
    return errors
