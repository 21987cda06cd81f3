"""The pending-workloads API on the shared manager: a runnable (so only the leader, whose engine
is current, answers) that reads the API server's front-proxy settings, serves, and on a local
control plane registers itself (held while it runs, taken over from a killed operator, removed
on a clean stop: `registration.LoopbackApiRegistration`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from rayquota import pki
from rayquota.operator.core import Manager
from rayquota.operator.kube import ApiError
from rayquota.operator.leader import new_identity
from rayquota.operator.queue.setup import QueueComponent
from rayquota.operator.visibility import discovery
from rayquota.operator.visibility.auth import FrontProxy, load_front_proxy
from rayquota.operator.visibility.discovery import VisibilityGroup
from rayquota.operator.visibility.engine_order import EngineOrder
from rayquota.operator.visibility.registration import LoopbackApiRegistration, LoopbackCertificate
from rayquota.operator.visibility.server import VisibilityServer
from rayquota.operator.visibility.settings import VisibilitySettings
from rayquota.ports import free_port

log = logging.getLogger(__name__)
RETRY_S = 5.0


@dataclass(frozen=True)
class VisibilityComponent:
    group: VisibilityGroup
    server: VisibilityServer

    def describe(self) -> str:
        return f"pending-workloads API {self.group.name} ({self.server.url})"


def setup(manager: Manager, settings: VisibilitySettings, queue: QueueComponent) -> VisibilityComponent:
    api = queue.objects.api
    group = discovery.of_mode(api.mode)
    order = EngineOrder(
        queue.loop.driver, queue.objects.workloads, manager.informer(api.local_queues, interned=True)
    )
    port = settings.port or free_port()
    server = VisibilityServer(manager.client, group, order, FrontProxy(""), bind=settings.bind, port=port)

    async def run() -> None:
        server.front = await _front_proxy(manager)
        context = pki.server_context()
        registration = None
        if settings.cert_dir is not None:
            folder = Path(settings.cert_dir)
            context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
        else:
            certificate = LoopbackCertificate.issue()
            pki.load_serving_pair(context, certificate.cert, certificate.key)
            if settings.loopback:
                holder = f"{new_identity()}-{port}"
                registration = LoopbackApiRegistration(
                    manager.client, group, certificate.ca_bundle, holder=holder
                )
        server.front.client_context(context)
        try:
            await server.serve(context, (lambda: registration.hold(port)) if registration else None)
        finally:
            if registration is not None:
                await registration.unregister()

    manager.add_runnable("pending-workloads API", run)
    return VisibilityComponent(group, server)


async def _front_proxy(manager: Manager) -> FrontProxy:
    """The API server's request-header settings; retried until it publishes them (said once: a
    local control plane started before the front-proxy flags existed never will, until
    `rayquota cluster down` and `up`)."""
    said = False
    while True:
        try:
            return await load_front_proxy(manager.client)
        except (LookupError, ApiError, aiohttp.ClientError, TimeoutError) as exc:
            if not said:
                log.warning(
                    "the pending-workloads API waits for the API server's front-proxy settings: %s", exc
                )
                said = True
            await asyncio.sleep(RETRY_S)
