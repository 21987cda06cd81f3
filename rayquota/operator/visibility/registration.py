"""On a local control plane the operator registers its pending-workloads API itself, as the
loopback webhooks do, and removes the registration when it stops (the Helm chart ships its own).

An APIService can only name a Service. A Service of type ExternalName whose ``externalName`` is
``127.0.0.1`` makes the aggregator call that host: kube-apiserver's resolver for a Service
(``ResolveCluster`` in k8s.io/apiserver/pkg/util/proxy, v1.34) answers
``https://<externalName>:<APIService port>`` for that type, and the availability check skips
the endpoint checks it makes for ClusterIP Services. This holds only while the API server runs
without ``--enable-aggregator-routing`` (its endpoint resolver refuses ExternalName Services).
The aggregator checks the serving certificate against the APIService's caBundle under the name
``<service>.<namespace>.svc``, which the generated certificate carries.

The aggregated ClusterRole that lets ``view`` (and ``edit``, ``admin``) read the
pendingworkloads resources is created too, as the chart does, and left in place."""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def api_service(group: VisibilityGroup, version: str, port: int, ca_bundle: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": group.apiservice_name(version)},
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


class LoopbackApiRegistration:
    """Registers the Service, the APIServices and the viewer role; removes the first two again,
    unless another operator registered since."""

    def __init__(self, client: KubeClient, group: VisibilityGroup, ca_bundle: str) -> None:
        self.client = client
        self.group = group
        self.ca_bundle = ca_bundle
        # path -> whether the object there is still what this process wrote
        self._written: dict[str, Callable[[dict[str, Any]], bool]] = {}

    async def _put(self, path: str, collection: str, body: dict[str, Any]) -> None:
        existing = await self.client.get(path)
        if existing is None:
            await self.client.create(collection, body)
        else:
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            await self.client.replace(path, body)

    async def register(self, port: int) -> None:
        service = core_path(SERVICE_NAMESPACE, "services", SERVICE_NAME)
        body = external_name_service(port)
        await self._put(service, core_path(SERVICE_NAMESPACE, "services"), body)
        self._written[service] = lambda svc: [p.get("port") for p in svc["spec"].get("ports") or []] == [port]
        role = viewer_role(self.group)
        await self._put(CLUSTER_ROLES.path(name=role["metadata"]["name"]), CLUSTER_ROLES.path(), role)
        for version in self.group.versions:
            path = API_SERVICES.path(name=self.group.apiservice_name(version))
            body = api_service(self.group, version, port, self.ca_bundle)
            await self._put(path, API_SERVICES.path(), body)
            self._written[path] = lambda api: (
                api["spec"].get("service", {}).get("port") == port
                and (api["spec"].get("caBundle") == self.ca_bundle)
            )

    async def unregister(self) -> None:
        """Delete what this process registered, unless its spec changed since (the status does:
        the aggregator writes the APIService's availability)."""
        for path, still_ours in reversed(list(self._written.items())):
            try:
                current = await self.client.get(path)
                if current is None:
                    continue
                if not still_ours(current):
                    log.info("%s left in place: another operator registered it since", path)
                    continue
                version = current["metadata"]["resourceVersion"]
                body = {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "preconditions": {"resourceVersion": version},
                }
                await self.client.request("DELETE", path, body=body)
            except Conflict:
                log.info("%s left in place: it changed while being removed", path)
            except ApiError as exc:
                log.debug("%s not deleted: %s", path, exc)
        self._written.clear()
