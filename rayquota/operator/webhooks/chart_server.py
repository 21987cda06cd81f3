"""The admission webhooks as the Helm chart serves them.

The queue integration's handlers (`webhooks.server.WebhookServer`) behind the chart's Service,
with the certificate the keeper issues and renews (`cert_keeper`) or cert-manager's files. The
chart owns the webhook configurations, so nothing is registered or deleted here (the operator's
RBAC could not), unlike the queue integration's local server (`RAYQUOTA_WEBHOOK_PORT`), which
registers configurations pointing at 127.0.0.1 for development.

Runs in the leader only (a runnable), which is also the only Ready pod behind the Service.
Enabled by `RAYQUOTA_WEBHOOK_LISTEN_PORT`.
"""

from __future__ import annotations

import asyncio
import logging
import os

from aiohttp import web

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager
from rayquota.operator.webhooks.cert_keeper import (
    CertificateKeeper,
    FileCertificate,
    ServingCertificate,
)
from rayquota.operator.webhooks.server import WebhookServer

log = logging.getLogger(__name__)


class ChartWebhookServer(WebhookServer):
    """The queue integration's handlers, served with a certificate kept elsewhere."""

    serving: ServingCertificate

    async def run(self) -> None:
        await self.serving.loaded.wait()
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.bind, self.port, ssl_context=self.serving.context).start()
            log.info("admission webhooks on https://%s:%d", self.bind, self.port)
            await asyncio.Event().wait()  # serve until cancelled
        finally:
            await runner.cleanup()


def setup(manager: Manager, config: OperatorConfig) -> ChartWebhookServer | None:
    del config
    port = os.environ.get("RAYQUOTA_WEBHOOK_LISTEN_PORT")
    if not port:
        return None
    queue = manager.components.get("queue")
    if queue is None:
        raise RuntimeError("RAYQUOTA_WEBHOOK_LISTEN_PORT: the webhooks need the queue integration")
    keeper: CertificateKeeper | None = manager.components.get("webhook-certs")
    if keeper is not None:
        serving = keeper.serving
    else:
        cert_dir = os.environ.get("RAYQUOTA_WEBHOOK_CERT_DIR")
        if not cert_dir:
            raise RuntimeError(
                "RAYQUOTA_WEBHOOK_LISTEN_PORT needs a certificate: RAYQUOTA_WEBHOOK_CERT_SECRET "
                "(issued by the operator) or RAYQUOTA_WEBHOOK_CERT_DIR (cert-manager's files)"
            )
        files = FileCertificate(cert_dir)
        manager.add_runnable("webhook certificate files", files.run)
        serving = files.serving
    bind = os.environ.get("RAYQUOTA_BIND_ADDRESS", "127.0.0.1")
    server = ChartWebhookServer(manager, queue.objects, queue.gate, int(port), bind)
    server.serving = serving
    manager.add_runnable("admission webhooks", server.run)
    manager.components["webhook-server"] = server
    return server
