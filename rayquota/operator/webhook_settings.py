"""Where the admission webhooks are served and where their certificate comes from: decided once
at start from the configuration (`rayquota.config.build.webhooks`), or by `rayquota run` for a
local control plane.

Three ways, one server:

- **generated** (`webhook.loopbackPort`, or `rayquota run` on the local control plane): the
  operator serves on 127.0.0.1 with a throw-away CA made at start-up, registers webhook
  configurations that point the API server at it, and deletes them when it stops. Only for an
  API server on the same host.
- **secret** (the Helm chart: `webhook.port` with `internalCertManagement.webhookSecretName`):
  the leader keeps a CA and serving certificate in the chart's Secret and the caBundle of the
  chart's configurations current.
- **files** (`webhook.port` with `webhook.certDir`): cert-manager's
  mounted files, reloaded when they change; cert-manager injects the caBundle.

The chart owns its configurations: in the last two ways nothing is registered or deleted.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

LOOPBACK = "127.0.0.1"


class CertificateSource(StrEnum):
    GENERATED = "generated"
    SECRET = "secret"
    FILES = "files"


@dataclass(frozen=True)
class CertSettings:
    """The Secret the leader keeps the webhook certificate in (the chart's self-issued mode)."""

    namespace: str
    secret: str
    hosts: tuple[str, ...]  # DNS names and IP addresses the serving certificate covers
    configurations: tuple[str, ...]  # the mutating and validating configurations by name
    ca_validity: dt.timedelta = dt.timedelta(days=3650)
    cert_validity: dt.timedelta = dt.timedelta(days=365)
    # Renew this long before expiry: ample time for a leader that is down for a while.
    renew_before: dt.timedelta = dt.timedelta(days=90)
    check_interval_s: float = 3600.0


@dataclass(frozen=True)
class WebhookSettings:
    certificate: CertificateSource
    port: int | None
    """Where the handlers listen; 0: any free loopback port; None: not served by this process
    (it only keeps the chart's certificate Secret)."""
    bind: str = LOOPBACK
    keeper: CertSettings | None = None
    cert_dir: str | None = None

    @property
    def registers_configurations(self) -> bool:
        """Only a generated certificate's server registers (and removes) its configurations."""
        return self.certificate is CertificateSource.GENERATED

    @classmethod
    def loopback(cls, port: int = 0) -> WebhookSettings:
        return cls(CertificateSource.GENERATED, port)
