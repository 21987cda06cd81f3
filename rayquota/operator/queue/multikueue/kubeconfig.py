"""A worker's API client, from the kubeconfig its MultiKueueCluster points at: a Secret in the
operator's namespace (key ``kubeconfig``) or a file (``locationType: Path``)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import Any

import kubernetes
import yaml

from rayquota import __version__
from rayquota.api.multikueue_v1alpha1 import KUBECONFIG_SECRET_KEY, LocationType
from rayquota.operator.kube import KubeClient, core_path
from rayquota.operator.queue.multikueue.kubeconfig_safety import (
    DEFAULT_PATH_PREFIX,
    INSECURE_REASON,
    UnsafeKubeconfig,
    allowed_path,
    refuse_unsafe,
)

# Kueue's reasons on a MultiKueueCluster's Active=False condition: the kubeconfig could not be
# had or read (a missing Secret or key, a Path outside the allowed folder, unreadable text).
BAD_KUBECONFIG_REASON = "BadKubeConfig"


class WorkerConfigError(Exception):
    """The worker's kubeconfig cannot be had or read (the MultiKueueCluster says why, with
    :attr:`reason` as its condition's reason)."""

    reason = BAD_KUBECONFIG_REASON


class UnsupportedClusterProfile(WorkerConfigError):
    """``clusterSource.clusterProfileRef``: not read (Kueue's reason for a ClusterProfile it
    cannot use)."""

    reason = "BadClusterProfile"


class InsecureWorkerConfig(WorkerConfigError):
    """The worker's kubeconfig is refused for safety (see kubeconfig_safety)."""

    reason = INSECURE_REASON


async def kubeconfig_text(
    local: KubeClient,
    cluster_source: Mapping[str, Any],
    namespace: str,
    path_prefix: str = DEFAULT_PATH_PREFIX,
) -> str:
    source = cluster_source.get("kubeConfig")
    if not source:
        raise UnsupportedClusterProfile("clusterSource.clusterProfileRef is not supported: use kubeConfig")
    location = str(source.get("location") or "")
    if (source.get("locationType") or LocationType.SECRET) == LocationType.PATH:
        try:
            path = allowed_path(location, path_prefix)
        except UnsafeKubeconfig as exc:
            # Kueue reads the path before it validates the content: BadKubeConfig, not Insecure.
            raise WorkerConfigError(str(exc)) from exc
        try:
            return await asyncio.to_thread(path.read_text)
        except OSError as exc:
            raise WorkerConfigError(f"kubeconfig file {location}: {exc.strerror or exc}") from exc
    secret = await local.get(core_path(namespace, "secrets", location))
    if secret is None:
        raise WorkerConfigError(f"Secret {namespace}/{location} not found")
    encoded = (secret.get("data") or {}).get(KUBECONFIG_SECRET_KEY)
    if not encoded:
        raise WorkerConfigError(f"Secret {namespace}/{location} has no key {KUBECONFIG_SECRET_KEY!r}")
    try:
        return base64.b64decode(encoded).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise WorkerConfigError(f"Secret {namespace}/{location}: the kubeconfig is not text") from exc


# How the manager's requests show in a worker's audit log, apart from the worker's own operator.
USER_AGENT = "rayquota-multikueue"


def client_of(text: str, *, timeout_s: float = 30.0) -> KubeClient:
    """A client for the kubeconfig's current context (embedded certificates are written to
    temporary files by the client library, as for any kubeconfig)."""
    try:
        config = yaml.safe_load(text)
        if not isinstance(config, dict):
            raise WorkerConfigError("the kubeconfig cannot be used: it is not a YAML mapping")
        refuse_unsafe(config)
    except UnsafeKubeconfig as exc:
        raise InsecureWorkerConfig(str(exc)) from exc
    except yaml.YAMLError as exc:
        raise WorkerConfigError(f"the kubeconfig cannot be used: {exc}") from exc
    try:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
            config, client_configuration=configuration, persist_config=False
        )
    except (yaml.YAMLError, kubernetes.config.ConfigException, TypeError, KeyError, ValueError) as exc:
        raise WorkerConfigError(f"the kubeconfig cannot be used: {exc}") from exc
    return KubeClient(configuration, timeout_s=timeout_s, user_agent=f"{USER_AGENT}/{__version__}")
