"""Who is asking, and may they: as every aggregated API server does it.

The API server authenticates the user and proxies the request with its front-proxy client
certificate, naming the user in request headers (``X-Remote-User``, ``X-Remote-Group``, ...). The
server trusts those headers only on a connection whose client certificate the request-header CA
signed (and, when the API server names any, whose common name is one of the allowed names), and
reads the CA, the names and the header names from the ConfigMap
``kube-system/extension-apiserver-authentication`` the API server publishes. Each request is then
authorized by a SubjectAccessReview: delegated authorization, so RBAC decides as for any API."""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from multidict import CIMultiDictProxy

from rayquota.operator.kube import KubeClient, core_path

AUTHENTICATION_CONFIGMAP = core_path("kube-system", "configmaps", "extension-apiserver-authentication")
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class FrontProxy:
    """The API server's request-header authentication settings."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    def client_context(self, context: ssl.SSLContext) -> None:
        """Make `context` ask every client for a certificate the request-header CA signed."""
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=self.client_ca)

    def trusts(self, peer_common_name: str | None) -> bool:
        return peer_common_name is not None and (
            not self.allowed_names or peer_common_name in self.allowed_names
        )


def _names(data: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return default
    return tuple(str(v) for v in json.loads(raw))


def front_proxy_of(configmap: Mapping[str, Any]) -> FrontProxy:
    data = configmap.get("data") or {}
    ca = data.get("requestheader-client-ca-file")
    if not ca:
        raise LookupError(
            "ConfigMap kube-system/extension-apiserver-authentication has no "
            "requestheader-client-ca-file: the API server runs without --requestheader-client-ca-file, "
            "so it cannot proxy to an aggregated API"
        )
    return FrontProxy(
        client_ca=str(ca),
        allowed_names=_names(data, "requestheader-allowed-names", ()),
        username_headers=_names(data, "requestheader-username-headers", ("X-Remote-User",)),
        group_headers=_names(data, "requestheader-group-headers", ("X-Remote-Group",)),
        extra_prefixes=_names(data, "requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
        uid_headers=_names(data, "requestheader-uid-headers", ()),
    )


async def load_front_proxy(client: KubeClient) -> FrontProxy:
    configmap = await client.get(AUTHENTICATION_CONFIGMAP)
    if configmap is None:
        raise LookupError("ConfigMap kube-system/extension-apiserver-authentication does not exist")
    return front_proxy_of(configmap)


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    uid: str = ""


def user_of(headers: CIMultiDictProxy[str], front: FrontProxy) -> User | None:
    """The user the API server named, or None when it named none."""
    name = next((v for h in front.username_headers for v in headers.getall(h, []) if v), None)
    if name is None:
        return None
    groups = tuple(v for h in front.group_headers for v in headers.getall(h, []) if v)
    extra: dict[str, list[str]] = {}
    prefixes = [p.lower() for p in front.extra_prefixes]
    for key, value in headers.items():
        lowered = str(key).lower()
        prefix = next((p for p in prefixes if lowered.startswith(p)), None)
        if prefix is not None:
            extra.setdefault(lowered[len(prefix) :], []).append(str(value))
    uid = next((v for h in front.uid_headers for v in headers.getall(h, []) if v), "")
    return User(name, groups, {k: tuple(v) for k, v in extra.items()}, uid)


def resource_attributes(
    group: str, version: str, resource: str, name: str, namespace: str = ""
) -> dict[str, Any]:
    plural, _, sub = resource.partition("/")
    attributes: dict[str, Any] = {
        "verb": "get",
        "group": group,
        "version": version,
        "resource": plural,
        "subresource": sub,
        "name": name,
    }
    if namespace:
        attributes["namespace"] = namespace
    return attributes


async def authorized(
    client: KubeClient, user: User, *, resource: Mapping[str, Any] | None = None, path: str = ""
) -> tuple[bool, str]:
    """Ask the API server (SubjectAccessReview) whether `user` may get `resource` or `path`."""
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if user.uid:
        spec["uid"] = user.uid
    if resource is not None:
        spec["resourceAttributes"] = dict(resource)
    else:
        spec["nonResourceAttributes"] = {"path": path, "verb": "get"}
    review = await client.create(
        SUBJECT_ACCESS_REVIEWS,
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
    )
    verdict = review.get("status") or {}
    return bool(verdict.get("allowed")) and not verdict.get("denied"), str(verdict.get("reason") or "")
