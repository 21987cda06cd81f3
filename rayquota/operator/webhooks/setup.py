"""The admission webhooks on the shared manager: one server, and the one place that turns the
settings into its certificate (generated, kept in the chart's Secret, or cert-manager's files)."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.core import Manager
from rayquota.operator.queue.setup import QueueComponent
from rayquota.operator.webhook_settings import CertificateSource, WebhookSettings
from rayquota.operator.webhooks.cert_keeper import (
    CertificateKeeper,
    FileCertificate,
    GeneratedCertificate,
    ServingCertificate,
)
from rayquota.operator.webhooks.configurations import LoopbackRegistration
from rayquota.operator.webhooks.server import WebhookServer
from rayquota.ports import free_port


@dataclass(frozen=True)
class WebhookComponent:
    settings: WebhookSettings
    server: WebhookServer | None
    """None: this process only keeps the chart's certificate Secret."""
    keeper: CertificateKeeper | None

    def describe(self) -> str:
        """For the start-up log: where, and with which certificate."""
        where = self.server.url if self.server is not None else "not served here"
        return f"webhooks ({where}, {self.settings.certificate} certificate)"


def setup(
    manager: Manager,
    settings: WebhookSettings,
    queue: QueueComponent,
    allowed_security_fields: frozenset[str] = frozenset(),
) -> WebhookComponent:
    """`allowed_security_fields`: the gated RayCluster fields whose feature gate is on
    (security_fields.allowed_fields); the webhooks accept those and refuse the others."""
    keeper = None
    if settings.keeper is not None:
        keeper = CertificateKeeper(manager.client, settings.keeper)
        manager.add_runnable("webhook certificates", keeper.run)
    if settings.port is None:
        return WebhookComponent(settings, None, keeper)
    serving, registration = _certificate(manager, settings, queue, keeper)
    server = WebhookServer(
        manager,
        queue.objects,
        queue.gate,
        bind=settings.bind,
        # Chosen now, so the start-up log says where; 0 is never a port the API server can call.
        port=settings.port or free_port(),
        serving=serving,
        registration=registration,
        dispatched=queue.dispatching.dispatches,
        allowed_security_fields=allowed_security_fields,
    )
    manager.add_runnable("admission webhooks", server.run)
    return WebhookComponent(settings, server, keeper)


def _certificate(
    manager: Manager, settings: WebhookSettings, queue: QueueComponent, keeper: CertificateKeeper | None
) -> tuple[ServingCertificate, LoopbackRegistration | None]:
    """The serving certificate, and the configurations to register when the server owns them."""
    match settings.certificate:
        case CertificateSource.GENERATED:
            generated = GeneratedCertificate.for_loopback()
            label_keys = tuple(queue.objects.settings.queue_label_keys)
            registration = LoopbackRegistration(
                manager.client, label_keys, generated.ca_bundle, hold_pods=queue.objects.holds_pods
            )
            return generated.serving, registration
        case CertificateSource.SECRET:
            assert keeper is not None, "settings with a Secret carry the keeper's settings"
            return keeper.serving, None
        case CertificateSource.FILES:
            assert settings.cert_dir is not None, "settings with files carry their directory"
            files = FileCertificate(settings.cert_dir)
            manager.add_runnable("webhook certificate files", files.run)
            return files.serving, None
