"""The HTTPS server of the pending-workloads API (aiohttp): discovery documents and the two
``pendingworkloads`` resources, behind request-header authentication and delegated
authorization (``auth``). It only answers the API server's aggregator: a connection without the
front-proxy client certificate is refused in the TLS handshake."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from rayquota.operator.kube import ApiError, KubeClient
from rayquota.operator.visibility import discovery, summary
from rayquota.operator.visibility.auth import FrontProxy, User, authorized, resource_attributes, user_of
from rayquota.operator.visibility.discovery import PENDING, VisibilityGroup
from rayquota.operator.visibility.engine_order import EngineOrder

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = web.RequestKey("user", User)


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> web.Response:
    return web.json_response(discovery.status(code, reason, message, details), status=code)


def _no_such_path(request: web.Request) -> web.Response:
    return _status(404, "NotFound", f"the server could not find the requested resource ({request.path})")


def _peer_common_name(request: web.Request) -> str | None:
    transport = request.transport
    peer = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class VisibilityServer:
    def __init__(
        self,
        client: KubeClient,
        group: VisibilityGroup,
        order: EngineOrder,
        front: FrontProxy,
        *,
        bind: str,
        port: int,
    ) -> None:
        self.client = client
        self.group = group
        self.order = order
        self.front = front
        self.bind = bind
        self.port = port
        self.app = web.Application(middlewares=[self._authenticate])
        prefix = f"/apis/{group.name}/{{version}}"
        self.app.add_routes(
            [
                web.get("/apis", self._group_list),
                web.get(f"/apis/{group.name}", self._group),
                web.get(prefix, self._resources),
                web.get(f"{prefix}/clusterqueues/{{name}}/{PENDING}", self._in_cluster_queue),
                web.get(
                    f"{prefix}/namespaces/{{namespace}}/localqueues/{{name}}/{PENDING}", self._in_local_queue
                ),
            ]
        )

    @property
    def url(self) -> str:
        return f"https://{self.bind}:{self.port}"

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.front.trusts(_peer_common_name(request)):
            return _status(
                401, "Unauthorized", "the client certificate is not one the API server proxies with"
            )
        user = user_of(request.headers, self.front)
        if user is None:
            return _status(401, "Unauthorized", "the request names no user (X-Remote-User)")
        request[USER_KEY] = user
        return await handler(request)

    async def _may(self, request: web.Request, **target: Any) -> web.Response | None:
        """None when the user may; else the refusal (403), or 503 when the API server cannot say."""
        user: User = request[USER_KEY]
        try:
            allowed, reason = await authorized(self.client, user, **target)
        except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("authorization of %s failed: %s", user.name, exc)
            return _status(503, "ServiceUnavailable", f"authorization could not be checked: {exc}")
        if allowed:
            return None
        resource = target.get("resource")
        if resource is None:
            words = f'User "{user.name}" cannot get path "{target["path"]}"'
            return _status(403, "Forbidden", f"forbidden: {words}" + (f": {reason}" if reason else ""))
        scope = f' in the namespace "{resource["namespace"]}"' if resource.get("namespace") else ""
        what = f"{resource['resource']}/{resource['subresource']}"
        message = (
            f'{resource["resource"]}.{self.group.name} "{resource["name"]}" is forbidden: User "{user.name}" '
            f'cannot get resource "{what}" in API group "{self.group.name}"{scope}'
        )
        details = {"name": resource["name"], "group": self.group.name, "kind": resource["resource"]}
        return _status(403, "Forbidden", message, details)

    def _version(self, request: web.Request) -> str | None:
        version = request.match_info["version"]
        return version if version in self.group.versions else None

    async def _group_list(self, request: web.Request) -> web.Response:
        refused = await self._may(request, path=request.path)
        return refused or web.json_response(discovery.api_group_list(self.group))

    async def _group(self, request: web.Request) -> web.Response:
        refused = await self._may(request, path=request.path)
        return refused or web.json_response(discovery.api_group(self.group))

    async def _resources(self, request: web.Request) -> web.Response:
        version = self._version(request)
        if version is None:
            return _status(
                404, "NotFound", f"the server could not find the requested resource ({request.path})"
            )
        refused = await self._may(request, path=request.path)
        return refused or web.json_response(discovery.resource_list(self.group, version))

    async def _in_cluster_queue(self, request: web.Request) -> web.Response:
        version, name = self._version(request), request.match_info["name"]
        if version is None:
            return _status(
                404, "NotFound", f"the server could not find the requested resource ({request.path})"
            )
        target = resource_attributes(self.group.name, version, f"clusterqueues/{PENDING}", name)
        if (refused := await self._may(request, resource=target)) is not None:
            return refused
        try:
            page = summary.page_of(request.query)
        except summary.BadQuery as exc:
            return _status(400, "BadRequest", str(exc))
        order = self.order.cluster_queue(name)
        if order is None:
            return self._not_found("clusterqueue", name)
        items = summary.in_cluster_queue(order, page)
        return web.json_response(summary.summary(self.group.api_version(version), items))

    async def _in_local_queue(self, request: web.Request) -> web.Response:
        version = self._version(request)
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if version is None:
            return _status(
                404, "NotFound", f"the server could not find the requested resource ({request.path})"
            )
        target = resource_attributes(self.group.name, version, f"localqueues/{PENDING}", name, namespace)
        if (refused := await self._may(request, resource=target)) is not None:
            return refused
        try:
            page = summary.page_of(request.query)
        except summary.BadQuery as exc:
            return _status(400, "BadRequest", str(exc))
        cluster_queue = self.order.cluster_queue_of(namespace, name)
        order = self.order.cluster_queue(cluster_queue) if cluster_queue is not None else None
        if order is None:
            return self._not_found("localqueue", name)
        items = summary.in_local_queue(order, namespace, name, page)
        return web.json_response(summary.summary(self.group.api_version(version), items))

    def _not_found(self, kind: str, name: str) -> web.Response:
        message = f'{kind}.{self.group.name} "{name}" not found'
        return _status(404, "NotFound", message, {"name": name, "group": self.group.name, "kind": kind})

    async def serve(self, context: Any, ready: Callable[[], Awaitable[None]] | None = None) -> None:
        """Serve on bind:port with `context` (TLS) until cancelled; `ready` runs once listening
        (it may run until cancelled: the registration's keeper)."""
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.bind, self.port, ssl_context=context).start()
            log.info("pending-workloads API (%s) on %s", self.group.name, self.url)
            if ready is not None:
                await ready()
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
