"""The writes a RayService reconcile makes: child clusters, Services, Gateway API objects, Serve
deploys and the head pods' ``ray.io/serve`` label. Each write is idempotent and emits one event,
so a reconcile that dies half-way is repaired by the next one.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any

from rayquota.operator.core import Manager, resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError
from rayquota.operator.ray.builders import services
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.builders.podspec import SERVE_LABEL
from rayquota.operator.ray.dashboard_api.dashboard import DashboardClients, RayDashboardClient, RetryPolicy
from rayquota.operator.ray.dashboard_api.resolver import DashboardResolver
from rayquota.operator.ray.rayservice import gateway, serve_service
from rayquota.operator.ray.rayservice.cluster import RAYSERVICE_KIND
from rayquota.operator.ray.rayservice.serve_client import ServeClient, serve_config
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

GATEWAYS = Resource(gateway.GATEWAY_GROUP, gateway.GATEWAY_VERSION, "gateways", "Gateway")
HTTPROUTES = Resource(gateway.GATEWAY_GROUP, gateway.GATEWAY_VERSION, "httproutes", "HTTPRoute")
GATEWAY_CLASSES = Resource(
    gateway.GATEWAY_GROUP, gateway.GATEWAY_VERSION, "gatewayclasses", "GatewayClass", namespaced=False
)
ALREADY_EXISTS = 409


def service_object_labels(service: Mapping[str, Any]) -> dict[str, str]:
    return {
        labels.ORIGINATED_FROM_CR_NAME: labels.label_value(str(service["metadata"]["name"])),
        labels.ORIGINATED_FROM_CRD: RAYSERVICE_KIND,
    }


def build_service_services(service: Mapping[str, Any], cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``<service>-head-svc`` and the serve Service (``<service>-serve-svc`` or the one
    ``spec.serveService`` describes), selecting ``cluster``, owned by the service."""
    name = str(service["metadata"]["name"])
    built = []
    for manifest, service_name in (
        (services.build_head_service(cluster), labels.head_service_name(name)),
        (services.build_serve_service(cluster), labels.serve_service_name(name)),
    ):
        manifest["metadata"]["name"] = service_name
        manifest["metadata"]["labels"] = {
            **manifest["metadata"].get("labels", {}),
            **service_object_labels(service),
        }
        manifest["metadata"]["ownerReferences"] = [labels.owner_reference(service)]
        built.append(manifest)
    if serve_service.custom_serve_service(service) is not None:
        built[1] = serve_service.build_custom_serve_service(service, cluster, built[1]["metadata"]["labels"])
    return built


def build_cluster_serve_service(service: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """``<cluster>-serve-svc``: one HTTPRoute backend during incremental upgrades, owned by the cluster."""
    manifest = services.build_serve_service(cluster)
    manifest["metadata"]["labels"] = {
        **manifest["metadata"].get("labels", {}),
        **service_object_labels(service),
    }
    return manifest


class RayServiceWrites:
    def __init__(
        self, manager: Manager, resolver: DashboardResolver, dashboard_timeout_s: float, tokens: AuthTokens
    ) -> None:
        self.client = manager.client
        self.recorder = manager.recorder
        self.resolver = resolver
        self.tokens = tokens
        # One shared session for every head (clusters come and go with each upgrade).
        self.dashboards = DashboardClients(
            timeout_s=dashboard_timeout_s, retry=RetryPolicy(attempts=2, initial_backoff_s=0.2)
        )

    async def close(self) -> None:
        await self.dashboards.close()

    def event(self, service: Mapping[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
        self.recorder.post(service, "Warning" if warning else "Normal", reason, message)

    # --- child clusters ---------------------------------------------------------------------------

    async def create_cluster(self, service: Mapping[str, Any], manifest: Mapping[str, Any]) -> None:
        meta = manifest["metadata"]
        try:
            await self.client.create(resources.RAYCLUSTERS.path(meta["namespace"]), manifest)
        except ApiError as exc:
            if exc.status == ALREADY_EXISTS:
                return  # created by an earlier pass whose result the cache has not shown yet
            self.event(
                service, "FailedToCreateRayCluster", f"RayCluster {meta['name']}: {exc.message}", warning=True
            )
            raise
        self.event(service, "CreatedRayCluster", f"Created RayCluster {meta['namespace']}/{meta['name']}")

    async def replace_cluster(self, service: Mapping[str, Any], updated: Mapping[str, Any], why: str) -> None:
        meta = updated["metadata"]
        try:
            await self.client.replace(resources.RAYCLUSTERS.path(meta["namespace"], meta["name"]), updated)
        except ApiError as exc:
            self.event(
                service, "FailedToUpdateRayCluster", f"RayCluster {meta['name']}: {exc.message}", warning=True
            )
            raise
        self.event(
            service, "UpdatedRayCluster", f"Updated RayCluster {meta['namespace']}/{meta['name']} ({why})"
        )

    async def annotate_cluster(self, cluster: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
        meta = cluster["metadata"]
        current = meta.get("annotations") or {}
        if all(current.get(key) == value for key, value in annotations.items()):
            return
        patch = {"metadata": {"annotations": dict(annotations)}}
        await self.client.merge_patch(resources.RAYCLUSTERS.path(meta["namespace"], meta["name"]), patch)

    async def delete_cluster(self, service: Mapping[str, Any], namespace: str, name: str, why: str) -> None:
        # Foreground: the cluster stays (being deleted) until its pods are gone, so whatever
        # accounts for its pods (a queue's quota) sees them as its own until then.
        path = resources.RAYCLUSTERS.path(namespace, name)
        if await self.client.delete(path, propagation="Foreground"):
            self.event(service, "DeletedRayCluster", f"Deleted RayCluster {namespace}/{name}: {why}")

    # --- Services ---------------------------------------------------------------------------------

    async def ensure_service(
        self,
        service: Mapping[str, Any],
        wanted: Mapping[str, Any],
        live: Mapping[str, Any] | None,
        *,
        announce: bool = True,
    ) -> None:
        """Create the Service, or point the live one's selector at the wanted cluster. ``announce``:
        record an event (not for the per-cluster Services, which come and go with their cluster)."""
        meta = wanted["metadata"]
        path = resources.SERVICES.path(meta["namespace"])
        if live is None:
            try:
                await self.client.create(path, wanted)
            except ApiError as exc:
                if exc.status == ALREADY_EXISTS:
                    return
                self.event(
                    service, "FailedToCreateService", f"Service {meta['name']}: {exc.message}", warning=True
                )
                raise
            if announce:
                self.event(service, "CreatedService", f"Created Service {meta['namespace']}/{meta['name']}")
            return
        if (live.get("spec") or {}).get("selector") == wanted["spec"]["selector"]:
            return
        updated = copy.deepcopy(dict(live))
        updated["spec"]["selector"] = wanted["spec"]["selector"]
        updated["spec"]["ports"] = wanted["spec"]["ports"]
        await self.client.replace(resources.SERVICES.path(meta["namespace"], meta["name"]), updated)
        cluster = wanted["spec"]["selector"].get(labels.RAY_CLUSTER)
        self.event(service, "UpdatedService", f"Service {meta['name']} now selects RayCluster {cluster}")

    async def delete_service(self, namespace: str, name: str) -> bool:
        return await self.client.delete(resources.SERVICES.path(namespace, name))

    # --- Gateway API ------------------------------------------------------------------------------

    async def gateway_class_exists(self, name: str) -> bool:
        """False when the GatewayClass, or the Gateway API itself, is not installed."""
        return await self.client.get(GATEWAY_CLASSES.path(None, name)) is not None

    async def ensure_gateway(self, service: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
        await self._ensure(service, GATEWAYS, wanted, gateway.gateway_settings)

    async def ensure_httproute(self, service: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
        # Weight changes are announced by the upgrade loop (TrafficMigrated), not once more here.
        await self._ensure(service, HTTPROUTES, wanted, gateway.route_backends, announce_updates=False)

    async def _ensure(
        self,
        service: Mapping[str, Any],
        resource: Resource,
        wanted: Mapping[str, Any],
        decided: Callable[[Mapping[str, Any]], Any],
        *,
        announce_updates: bool = True,
    ) -> None:
        """Create, or replace the spec when the fields this operator decides differ."""
        meta = wanted["metadata"]
        live = await self.client.get(resource.path(meta["namespace"], meta["name"]))
        kind = resource.kind
        if live is None:
            try:
                await self.client.create(resource.path(meta["namespace"]), wanted)
            except ApiError as exc:
                self.event(
                    service, f"FailedToCreate{kind}", f"{kind} {meta['name']}: {exc.message}", warning=True
                )
                raise
            self.event(service, f"Created{kind}", f"Created {kind} {meta['namespace']}/{meta['name']}")
            return
        if decided(live) == decided(wanted):
            return
        updated = {**live, "spec": wanted["spec"]}
        try:
            await self.client.replace(resource.path(meta["namespace"], meta["name"]), updated)
        except ApiError as exc:
            self.event(
                service, f"FailedToUpdate{kind}", f"{kind} {meta['name']}: {exc.message}", warning=True
            )
            raise
        if announce_updates:
            self.event(service, f"Updated{kind}", f"Updated {kind} {meta['namespace']}/{meta['name']}")

    async def delete_gateway_objects(self, namespace: str, service_name: str) -> bool:
        """Delete the HTTPRoute and Gateway; True while either still existed."""
        existed = False
        for resource, name in (
            (HTTPROUTES, gateway.httproute_name(service_name)),
            (GATEWAYS, gateway.gateway_name(service_name)),
        ):
            try:
                existed |= await self.client.delete(resource.path(namespace, name))
            except ApiError as exc:
                if exc.status != 404:
                    raise
        return existed

    # --- Serve ------------------------------------------------------------------------------------

    async def _dashboard(self, cluster: Mapping[str, Any]) -> RayDashboardClient:
        headers = await self.tokens.headers_for(cluster)
        return self.dashboards.client(self.resolver.dashboard_url(cluster), headers)

    async def serve_client(self, cluster: Mapping[str, Any]) -> ServeClient:
        return ServeClient(await self._dashboard(cluster))

    async def deploy(
        self, service: Mapping[str, Any], cluster: Mapping[str, Any], config_v2: str, capacity: int | None
    ) -> None:
        """PUT the Serve config (with the target capacity), then record it on the cluster."""
        await ServeClient(await self._dashboard(cluster)).deploy(serve_config(config_v2, capacity))
        await self.record_deploy(service, cluster, config_v2)

    async def record_deploy(
        self, service: Mapping[str, Any], cluster: Mapping[str, Any], config_v2: str
    ) -> None:
        """Record a deployed config on the cluster. Only a changed config is announced: capacity
        steps are the upgrade loop's to report."""
        changed = (cluster["metadata"].get("annotations") or {}).get(
            labels.SERVE_CONFIG_ANNOTATION
        ) != config_v2
        await self.annotate_cluster(cluster, {labels.SERVE_CONFIG_ANNOTATION: config_v2})
        if changed:
            name = cluster["metadata"]["name"]
            self.event(service, "UpdatedServeApplications", f"Applied serveConfigV2 to RayCluster {name}")

    async def label_head_pod(self, pod: Mapping[str, Any], serving: bool) -> None:
        value = "true" if serving else "false"
        meta = pod["metadata"]
        if (meta.get("labels") or {}).get(SERVE_LABEL) == value:
            return
        patch = {"metadata": {"labels": {SERVE_LABEL: value}}}
        try:
            await self.client.merge_patch(resources.PODS.path(meta["namespace"], meta["name"]), patch)
        except ApiError as exc:
            if exc.status != 404:
                raise
