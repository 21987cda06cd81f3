"""What a worker's kubeconfig may hold before the manager uses it.

A MultiKueueCluster's kubeconfig is written by whoever may create that object or its Secret,
yet the manager loads it inside the operator's process, with the operator's files and
credentials at hand. So a kubeconfig that would run a command (an ``exec`` credential plugin),
read a file of the operator's (a token, CA or client-certificate path), send a password, or
talk to the worker without verifying its certificate is refused, as Kueue's MultiKueue refuses
it: the worker shows ``Active=False`` with the reason ``InsecureKubeConfig`` and the offending
field. A ``locationType: Path`` kubeconfig must lie under one allowed folder.

rayquota refuses a little more than Kueue v0.19 does: client-certificate and client-key
*file paths* too (Kueue checks only the CA path), since they read the operator's files just
the same; the ``-data`` forms are accepted.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Kueue's reason for a kubeconfig refused by these rules.
INSECURE_REASON = "InsecureKubeConfig"
# Kueue's fixed folder for Path kubeconfigs (its MultiKueueKubeConfigPathValidation gate).
DEFAULT_PATH_PREFIX = "/etc/multikueue/kubeconfigs"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# user fields that read a file or run something, with what to use instead
_USER_FILE_FIELDS = {
    "tokenFile": "use token",
    "client-certificate": "use client-certificate-data",
    "client-key": "use client-key-data",
}


class UnsafeKubeconfig(ValueError):
    """A kubeconfig refused for safety; the message names the field."""


def _named(entries: Any, key: str) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for index, entry in enumerate(entries or []):
        if not isinstance(entry, Mapping):
            raise UnsafeKubeconfig(f"{key}[{index}]: expected a mapping")
        body = entry.get(key.rstrip("s")) or {}
        if not isinstance(body, Mapping):
            raise UnsafeKubeconfig(f"{key}[{index}].{key.rstrip('s')}: expected a mapping")
        found.append((str(entry.get("name") or index), body))
    return found


def _trusted_host(server: str) -> bool:
    """An https URL whose host is an IP address or a DNS-1123 subdomain."""
    try:
        parts = urlsplit(server)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("https", "http") or not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return len(host) <= 253 and all(_DNS_LABEL.match(label) for label in host.split("."))


def refuse_unsafe(config: Mapping[str, Any]) -> None:
    """Raise :class:`UnsafeKubeconfig` naming the first field that makes ``config`` unsafe."""
    for name, user in _named(config.get("users"), "users"):
        where = f"users[{name}].user"
        if "exec" in user:
            raise UnsafeKubeconfig(
                f"{where}.exec: exec credential plugins are not allowed (they run a command in the operator)"
            )
        if "auth-provider" in user:
            raise UnsafeKubeconfig(f"{where}.auth-provider: auth providers are not allowed")
        if user.get("username") or user.get("password"):
            raise UnsafeKubeconfig(f"{where}.username/password: basic auth is not allowed")
        for field, instead in _USER_FILE_FIELDS.items():
            if user.get(field):
                raise UnsafeKubeconfig(
                    f"{where}.{field}: file paths are not allowed (they read the operator's files); {instead}"
                )
    for name, cluster in _named(config.get("clusters"), "clusters"):
        where = f"clusters[{name}].cluster"
        if cluster.get("insecure-skip-tls-verify"):
            raise UnsafeKubeconfig(
                f"{where}.insecure-skip-tls-verify: TLS verification may not be turned off"
            )
        if cluster.get("certificate-authority"):
            raise UnsafeKubeconfig(
                f"{where}.certificate-authority: file paths are not allowed; use certificate-authority-data"
            )
        server = str(cluster.get("server") or "")
        if not server:
            raise UnsafeKubeconfig(f"{where}.server: a server URL is required")
        if not _trusted_host(server):
            raise UnsafeKubeconfig(f"{where}.server: {server!r} is not a URL with an IP address or DNS name")


def allowed_path(raw: str, prefix: str) -> Path:
    """The resolved kubeconfig file for a ``locationType: Path`` location, which must be an
    absolute path without ``..`` that stays under ``prefix`` once symlinks are resolved."""
    if not raw:
        raise UnsafeKubeconfig("clusterSource.kubeConfig.location: a path is required")
    cleaned = os.path.normpath(raw)
    if not os.path.isabs(cleaned):
        raise UnsafeKubeconfig(f"clusterSource.kubeConfig.location {raw!r}: the path must be absolute")
    if ".." in Path(raw).parts:
        raise UnsafeKubeconfig(f"clusterSource.kubeConfig.location {raw!r}: the path may not contain '..'")
    try:
        root = Path(prefix).resolve(strict=True)
    except OSError:
        raise UnsafeKubeconfig(
            f"clusterSource.kubeConfig.location {raw!r}: "
            f"not under the allowed folder {prefix} (which does not exist)"
        ) from None
    resolved = Path(cleaned).resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeKubeconfig(
            f"clusterSource.kubeConfig.location {raw!r}: {resolved} is not under the allowed folder {root}"
        )
    return resolved
