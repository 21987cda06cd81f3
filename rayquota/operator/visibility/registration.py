"""On a local control plane the operator registers its pending-workloads API itself, as the
loopback webhooks do, and removes the registration when it stops (the Helm chart ships its own).

An APIService can only name a Service. A Service of type ExternalName whose ``externalName`` is
``127.0.0.1`` makes the aggregator call that host: kube-apiserver's resolver for a Service
(``ResolveCluster`` in k8s.io/apiserver/pkg/util/proxy, v1.34) answers
``https://<externalName>:<APIService port>`` for that type, and the availability check skips
the endpoint checks it makes for ClusterIP Services. This holds only while the API server runs
without ``--enable-aggregator-routing`` (its endpoint resolver refuses ExternalName Services).
The aggregator checks the serving certificate against the APIService's caBundle under the name
``<service>.<namespace>.svc``, which every operator's generated certificate carries.

Several operators may share one control plane; which one holds the registration, and how a
killed one's is replaced, is `LoopbackApiRegistration`'s.

The aggregated ClusterRole that lets ``view`` (and ``edit``, ``admin``) read the
pendingworkloads resources is created too, as the chart does, and left in place."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from rayquota import pki
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError, Conflict, KubeClient, core_path
from rayquota.operator.visibility.discovery import PENDING, VisibilityGroup
from rayquota.operator.webhook_settings import LOOPBACK

SERVICE_NAME = "rayquota-visibility"
SERVICE_NAMESPACE = "kube-system"
VIEWER_ROLE = "rayquota-pending-workloads-viewer"
AGGREGATE_TO = ("view", "edit", "admin")
API_SERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False)
HOLDER_ANNOTATION = "rayquota.io/visibility-holder"
RECHECK_S = 5.0
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)

log = logging.getLogger(__name__)


def service_host(name: str = SERVICE_NAME, namespace: str = SERVICE_NAMESPACE) -> str:
    """The name the aggregator checks the serving certificate against."""
    return f"{name}.{namespace}.svc"


@dataclass(frozen=True)
class LoopbackCertificate:
    cert: bytes
    key: bytes
    ca_bundle: str
    """base64 PEM of the throw-away CA, for the APIService's caBundle"""

    @classmethod
    def issue(cls) -> LoopbackCertificate:
        validity = dt.timedelta(days=365)
        ca, ca_key = pki.issue_ca("rayquota-visibility-loopback-ca", validity=validity)
        key = pki.new_key()
        hosts = (service_host(), LOOPBACK, "localhost")
        cert = pki.issue_leaf(pki.name(service_host()), key, ca, ca_key, validity=validity, hosts=hosts)
        return cls(pki.cert_pem(cert), pki.key_pem(key), base64.b64encode(pki.cert_pem(ca)).decode())


def external_name_service(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
        "spec": {
            "type": "ExternalName",
            "externalName": LOOPBACK,
            "ports": [{"name": "https", "port": port}],
        },
    }


def api_service(
    group: VisibilityGroup, version: str, port: int, ca_bundle: str, holder: str
) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": group.apiservice_name(version), "annotations": {HOLDER_ANNOTATION: holder}},
        "spec": {
            "group": group.name,
            "version": version,
            "service": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE, "port": port},
            "caBundle": ca_bundle,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


def viewer_role(group: VisibilityGroup) -> dict[str, Any]:
    labels = {f"rbac.authorization.k8s.io/aggregate-to-{role}": "true" for role in AGGREGATE_TO}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{VIEWER_ROLE}-{group.name}", "labels": labels},
        "rules": [
            {
                "apiGroups": [group.name],
                "resources": [f"clusterqueues/{PENDING}", f"localqueues/{PENDING}"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    }


async def endpoint_answers(port: int, ca_bundle: str, host: str = LOOPBACK, timeout_s: float = 2.0) -> bool:
    """Whether the holder of a registration still serves where the loopback Service sends the
    aggregator: a TLS handshake at ``port`` that the registration's own caBundle verifies under
    the Service's name. Each operator issues its own throw-away CA, so a port reused by another
    process (or another operator) does not pass for the holder: only its key does."""
    try:
        context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    except (ValueError, ssl.SSLError):
        return False
    try:
        connecting = asyncio.open_connection(host, port, ssl=context, server_hostname=service_host())
        _, writer = await asyncio.wait_for(connecting, timeout_s)
    except (OSError, TimeoutError):  # ssl.SSLError is an OSError
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class LoopbackApiRegistration:
    """Holds the Service, the APIServices and the viewer role for one operator process.

    The APIServices are cluster-scoped, so of several operators on one control plane one holds
    them: within a deployment only the leader runs this (the pending-workloads API is a
    leader-only runnable); between operators with separate leases (other namespaces, other
    releases) the first to register holds them while its endpoint answers with a certificate of
    the registration's CA (`endpoint_answers`). The holder is written
    on the preferred version's APIService (``HOLDER_ANNOTATION``); the others follow it. Every
    `RECHECK_S` a registration whose endpoint no longer answers (its operator was killed) is
    replaced, with the read resourceVersion so that of two operators taking over one wins. A
    clean stop deletes what this process still holds. An APIService that does not name the
    loopback Service (the chart's) is never touched."""

    def __init__(
        self,
        client: KubeClient,
        group: VisibilityGroup,
        ca_bundle: str,
        *,
        holder: str,
        answers: Callable[[int, str], Awaitable[bool]] = endpoint_answers,
    ) -> None:
        self.client = client
        self.group = group
        self.ca_bundle = ca_bundle
        self.holder = holder
        self.answers = answers
        self.holding = False
        self._waiting_said = False

    def _path(self, version: str) -> str:
        return API_SERVICES.path(name=self.group.apiservice_name(version))

    async def hold(self, port: int) -> None:
        """Claim the registration now and every `RECHECK_S` until cancelled."""
        while True:
            try:
                await self.claim(port)
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("the pending-workloads APIService could not be checked: %s", exc)
            await asyncio.sleep(RECHECK_S)

    async def claim(self, port: int) -> bool:
        """Register, unless a live operator (or the chart) holds the registration; whether this
        process holds it now."""
        preferred = self._path(self.group.preferred)
        current = await self.client.get(preferred)
        if current is not None and not await self._may_replace(current):
            self.holding = False
            return False
        body = api_service(self.group, self.group.preferred, port, self.ca_bundle, self.holder)
        if current is not None and self._is_mine(current) and current["spec"] == body["spec"]:
            self.holding = True
            return True
        await self._ensure_service_and_role(port)
        try:
            await _create_or_replace(self.client, preferred, current, body)
        except Conflict:
            log.info("%s: another operator registered it first", preferred)
            self.holding = False
            return False
        for version in self.group.versions[1:]:
            path = self._path(version)
            existing = await self.client.get(path)
            other = api_service(self.group, version, port, self.ca_bundle, self.holder)
            await _create_or_replace(self.client, path, existing, other)
        if current is not None and not self._is_mine(current):
            holder = _holder_of(current) or "no holder"
            log.warning("%s replaced: its endpoint (%s) does not answer", preferred, holder)
        self.holding, self._waiting_said = True, False
        return True

    def _is_mine(self, current: dict[str, Any]) -> bool:
        return _holder_of(current) == self.holder

    async def _may_replace(self, current: dict[str, Any]) -> bool:
        service = current["spec"].get("service") or {}
        if (service.get("name"), service.get("namespace")) != (SERVICE_NAME, SERVICE_NAMESPACE):
            self._say_waiting(current, "it names another Service (the chart's?)")
            return False
        if self._is_mine(current):
            return True
        port, ca_bundle = service.get("port"), current["spec"].get("caBundle")
        if isinstance(port, int) and isinstance(ca_bundle, str) and await self.answers(port, ca_bundle):
            self._say_waiting(current, f"its endpoint (port {port}) answers with its certificate")
            return False
        return True

    def _say_waiting(self, current: dict[str, Any], why: str) -> None:
        if not self._waiting_said:
            log.info(
                "%s is held by %s (%s): this operator does not register it while that holds",
                current["metadata"]["name"], _holder_of(current) or "another install", why,
            )  # fmt: skip
            self._waiting_said = True

    async def _ensure_service_and_role(self, port: int) -> None:
        service = core_path(SERVICE_NAMESPACE, "services", SERVICE_NAME)
        body = external_name_service(port)
        await _create_or_replace(self.client, service, await self.client.get(service), body)
        role = viewer_role(self.group)
        path = CLUSTER_ROLES.path(name=role["metadata"]["name"])
        await _create_or_replace(self.client, path, await self.client.get(path), role)

    async def unregister(self) -> None:
        """Delete the APIServices this process still holds (each only if unchanged since read),
        and the Service once no APIService names it."""
        for version in reversed(self.group.versions):
            path = self._path(version)
            try:
                current = await self.client.get(path)
                if current is None or _holder_of(current) != self.holder:
                    continue
                await _delete_unchanged(self.client, path, current)
            except Conflict:
                log.info("%s left in place: it changed while being removed", path)
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("%s not deleted: %s", path, exc)
        self.holding = False
        try:
            await self._delete_service_unless_named()
        except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.debug("the loopback Service not deleted: %s", exc)

    async def _delete_service_unless_named(self) -> None:
        for api in await self.client.list_items(API_SERVICES.path()):
            named = api["spec"].get("service") or {}
            if (named.get("name"), named.get("namespace")) == (SERVICE_NAME, SERVICE_NAMESPACE):
                return
        path = core_path(SERVICE_NAMESPACE, "services", SERVICE_NAME)
        current = await self.client.get(path)
        if current is not None:
            await _delete_unchanged(self.client, path, current)


def _holder_of(api: dict[str, Any]) -> str | None:
    holder = (api["metadata"].get("annotations") or {}).get(HOLDER_ANNOTATION)
    return str(holder) if holder is not None else None


async def _create_or_replace(
    client: KubeClient, path: str, current: dict[str, Any] | None, body: dict[str, Any]
) -> None:
    """Create at `path`, or replace `current` there (its resourceVersion: Conflict if it changed)."""
    if current is None:
        await client.create(path.rsplit("/", 1)[0], body)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await client.replace(path, body)


async def _delete_unchanged(client: KubeClient, path: str, current: dict[str, Any]) -> None:
    version = current["metadata"]["resourceVersion"]
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": version}}
    await client.request("DELETE", path, body=body)
