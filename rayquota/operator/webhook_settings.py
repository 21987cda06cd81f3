"""Where the admission webhooks are served and where their certificate comes from: decided here,
once, from the environment (or by `rayquota run` for a local control plane).

Three ways, one server:

- **generated** (`RAYQUOTA_WEBHOOK_PORT`, or `rayquota run` on the local control plane): the
  operator serves on 127.0.0.1 with a throw-away CA made at start-up, registers webhook
  configurations that point the API server at it, and deletes them when it stops. Only for an
  API server on the same host.
- **secret** (the Helm chart, `RAYQUOTA_WEBHOOK_LISTEN_PORT` with `RAYQUOTA_WEBHOOK_CERT_SECRET`):
  the leader keeps a CA and serving certificate in the chart's Secret and the caBundle of the
  chart's configurations current.
- **files** (`RAYQUOTA_WEBHOOK_LISTEN_PORT` with `RAYQUOTA_WEBHOOK_CERT_DIR`): cert-manager's
  mounted files, reloaded when they change; cert-manager injects the caBundle.

The chart owns its configurations: in the last two ways nothing is registered or deleted.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

LOOPBACK = "127.0.0.1"


class CertificateSource(StrEnum):
    GENERATED = "generated"
    SECRET = "secret"
    FILES = "files"


def _split(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CertSettings | None:
        """None unless RAYQUOTA_WEBHOOK_CERT_SECRET names the Secret to keep."""
        env = os.environ if env is None else env
        secret = env.get("RAYQUOTA_WEBHOOK_CERT_SECRET", "").strip()
        if not secret:
            return None
        hosts = _split(env.get("RAYQUOTA_WEBHOOK_HOSTS", ""))
        if not hosts:
            raise ValueError("RAYQUOTA_WEBHOOK_HOSTS: no host for the webhook serving certificate")
        return cls(
            namespace=env.get("RAYQUOTA_OPERATOR_NAMESPACE") or "default",
            secret=secret,
            hosts=hosts,
            configurations=_split(env.get("RAYQUOTA_WEBHOOK_CONFIGURATIONS", "")),
        )


def _port(name: str, raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a port number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{name}={raw!r}: expected a port number (0-65535)")
    return port


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebhookSettings | None:
        env = os.environ if env is None else env
        keeper = CertSettings.from_env(env)
        listen = env.get("RAYQUOTA_WEBHOOK_LISTEN_PORT", "").strip()
        loopback = env.get("RAYQUOTA_WEBHOOK_PORT")
        if listen and loopback is not None:
            raise ValueError(
                "RAYQUOTA_WEBHOOK_LISTEN_PORT (the chart's webhooks) and RAYQUOTA_WEBHOOK_PORT "
                "(loopback webhooks for a local control plane) are both set: set one"
            )
        if listen:
            port = _port("RAYQUOTA_WEBHOOK_LISTEN_PORT", listen)
            bind = env.get("RAYQUOTA_BIND_ADDRESS") or LOOPBACK
            if keeper is not None:
                return cls(CertificateSource.SECRET, port, bind, keeper=keeper)
            cert_dir = env.get("RAYQUOTA_WEBHOOK_CERT_DIR", "").strip()
            if not cert_dir:
                raise ValueError(
                    "RAYQUOTA_WEBHOOK_LISTEN_PORT needs a certificate: RAYQUOTA_WEBHOOK_CERT_SECRET "
                    "(issued by the operator) or RAYQUOTA_WEBHOOK_CERT_DIR (cert-manager's files)"
                )
            return cls(CertificateSource.FILES, port, bind, cert_dir=cert_dir)
        if loopback is not None:
            return cls.loopback(_port("RAYQUOTA_WEBHOOK_PORT", loopback.strip() or "0"))
        if keeper is not None:
            return cls(CertificateSource.SECRET, None, keeper=keeper)
        return None
