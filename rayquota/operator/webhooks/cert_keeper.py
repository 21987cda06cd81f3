"""The webhook serving certificate: the one the leader keeps in a Secret, cert-manager's files,
or a throw-away one for a loopback server (which one: `settings.WebhookSettings`).

Without cert-manager, the leader keeps a CA and a serving certificate in a Secret of its own
namespace, renews them before they expire, and keeps the caBundle of its webhook configurations
current. When the CA itself is renewed, the caBundle carries the old and the new CA until the
old one expires, so the API server trusts the certificate served before and after the switch.

With cert-manager (the chart's `webhooks.certManager.enabled`) the certificate arrives as files
in a mounted Secret instead (`RAYQUOTA_WEBHOOK_CERT_DIR`) and cert-manager injects the caBundle.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from rayquota import pki
from rayquota.operator.kube import Conflict, KubeClient, core_path
from rayquota.operator.webhook_settings import LOOPBACK, CertSettings

log = logging.getLogger(__name__)

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
WEBHOOK_CONFIGURATION_KINDS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
# Keys of the Secret. The previous CA stays trusted until it expires (a CA rotation).
CA_CERT, CA_KEY, PREVIOUS_CA_CERT, TLS_CERT, TLS_KEY = (
    "ca.crt",
    "ca.key",
    "ca-previous.crt",
    "tls.crt",
    "tls.key",
)

Clock = Callable[[], dt.datetime]


@dataclass(frozen=True)
class CertBundle:
    """PEM bytes, as stored in the Secret."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes
    previous_ca_cert: bytes = b""

    def ca_bundle(self, now: dt.datetime) -> bytes:
        """What the API server must trust: the CA, and the previous one while it is valid."""
        trusted = self.ca_cert
        if self.previous_ca_cert and _not_after(self.previous_ca_cert) > now:
            trusted += self.previous_ca_cert
        return trusted

    def to_secret_data(self) -> dict[str, str]:
        data = {
            CA_CERT: self.ca_cert,
            CA_KEY: self.ca_key,
            TLS_CERT: self.cert,
            TLS_KEY: self.key,
            PREVIOUS_CA_CERT: self.previous_ca_cert,
        }
        return {k: base64.b64encode(v).decode() for k, v in data.items() if v}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str] | None) -> CertBundle | None:
        raw = {k: base64.b64decode(v) for k, v in (data or {}).items()}
        if not all(raw.get(k) for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)):
            return None
        return cls(raw[CA_CERT], raw[CA_KEY], raw[TLS_CERT], raw[TLS_KEY], raw.get(PREVIOUS_CA_CERT, b""))


def _not_after(pem: bytes) -> dt.datetime:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def renewal_reason(
    bundle: CertBundle | None, hosts: tuple[str, ...], now: dt.datetime, renew_before: dt.timedelta
) -> str | None:
    """Why the bundle must be (re)issued, or None when it is good."""
    if bundle is None:
        return "no certificate yet"
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert)
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    except ValueError:
        return "the stored certificate does not parse"
    if ca.not_valid_after_utc - now < renew_before:
        return f"the CA expires at {ca.not_valid_after_utc:%Y-%m-%d}"
    if cert.not_valid_after_utc - now < renew_before:
        return f"the serving certificate expires at {cert.not_valid_after_utc:%Y-%m-%d}"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the serving certificate was not issued by the stored CA"
    if set(_names_of(cert)) != set(hosts):
        return f"the serving certificate covers {sorted(_names_of(cert))}, not {sorted(hosts)}"
    return None


def _names_of(cert: x509.Certificate) -> list[str]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [*san.get_values_for_type(x509.DNSName), *map(str, san.get_values_for_type(x509.IPAddress))]


def issue(
    hosts: tuple[str, ...], now: dt.datetime, settings: CertSettings, current: CertBundle | None = None
) -> CertBundle:
    """A serving certificate for `hosts`, signed by the current CA while that CA has long enough
    to live, else by a new CA (the old one then stays in the caBundle until it expires)."""
    ca_cert_pem, ca_key_pem, previous = b"", b"", b""
    if current is not None:
        try:
            if _not_after(current.ca_cert) - now >= settings.renew_before:
                ca_cert_pem, ca_key_pem = current.ca_cert, current.ca_key
                previous = current.previous_ca_cert
            else:
                previous = current.ca_cert
        except ValueError:
            pass
    if not ca_cert_pem:
        new_ca, new_ca_key = pki.issue_ca(
            f"rayquota-webhook-ca-{now:%Y%m%d%H%M%S}", validity=settings.ca_validity, now=now
        )
        ca_cert_pem, ca_key_pem = pki.cert_pem(new_ca), pki.key_pem(new_ca_key)
    key = pki.new_key()
    cert = pki.issue_leaf(
        pki.name(hosts[0]),
        key,
        x509.load_pem_x509_certificate(ca_cert_pem),
        pki.load_key(ca_key_pem),
        validity=settings.cert_validity,
        hosts=hosts,
        now=now,
    )
    return CertBundle(
        ca_cert=ca_cert_pem,
        ca_key=ca_key_pem,
        cert=pki.cert_pem(cert),
        key=pki.key_pem(key),
        previous_ca_cert=previous,
    )


class ServingCertificate:
    """One SSLContext whose certificate is swapped in place: new handshakes use the new one.

    The server handshakes on a thread of its own (`serving_thread.py`); while it serves, a new
    certificate is loaded on that thread, between two handshakes, never beside one (OpenSSL does
    not promise a context changed while another thread uses it). ``loaded`` is set on the loop
    that loads (the operator's), where the server waits for it."""

    def __init__(self) -> None:
        self.context = pki.server_context()
        self.loaded = asyncio.Event()
        self._lock = threading.Lock()
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        self._pending: tuple[bytes, bytes] | None = None

    def load(self, cert: bytes, key: bytes) -> None:
        with self._lock:
            if self._serving_loop is None:
                pki.load_serving_pair(self.context, cert, key)
            else:
                self._pending = (cert, key)
                self._serving_loop.call_soon_threadsafe(self._load_pending)
        self.loaded.set()

    def served_from(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Called on the serving thread: ``loop`` handshakes with the context from now on; None
        once it no longer does (a certificate still pending is loaded then)."""
        with self._lock:
            self._serving_loop = loop
        if loop is None:
            self._load_pending()

    def _load_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                pki.load_serving_pair(self.context, *pending)


@dataclass(frozen=True)
class GeneratedCertificate:
    """A throw-away CA and a serving certificate for the loopback server, made at start-up and
    never stored: a restarted operator registers its configurations with a new caBundle."""

    serving: ServingCertificate
    ca_bundle: str
    """base64 PEM of the CA, for the configurations' caBundle"""

    @classmethod
    def for_loopback(cls) -> GeneratedCertificate:
        validity = dt.timedelta(days=365)
        ca, ca_key = pki.issue_ca("rayquota-webhook-loopback-ca", validity=validity)
        key = pki.new_key()
        cert = pki.issue_leaf(
            pki.name(LOOPBACK), key, ca, ca_key, validity=validity, hosts=(LOOPBACK, "localhost")
        )
        serving = ServingCertificate()
        serving.load(pki.cert_pem(cert), pki.key_pem(key))
        return cls(serving, base64.b64encode(pki.cert_pem(ca)).decode())


class FileCertificate:
    """A certificate another issuer (cert-manager) keeps in a mounted Secret: loaded at start and
    again whenever the kubelet updates the files."""

    def __init__(self, directory: str, *, check_interval_s: float = 60.0) -> None:
        self.cert_file = Path(directory) / TLS_CERT
        self.key_file = Path(directory) / TLS_KEY
        self.check_interval_s = check_interval_s
        self.serving = ServingCertificate()
        self._loaded: tuple[bytes, bytes] | None = None

    def reload(self) -> bool:
        """Load the files if they changed; True when a new certificate is served."""
        current = (self.cert_file.read_bytes(), self.key_file.read_bytes())
        if current == self._loaded:
            return False
        self.serving.load(*current)
        self._loaded = current
        log.info("webhook serving certificate loaded from %s", self.cert_file.parent)
        return True

    async def run(self) -> None:
        while True:
            try:
                self.reload()
            except OSError as exc:
                log.warning("webhook certificate files not readable yet: %s", exc)
            await asyncio.sleep(self.check_interval_s)


class CertificateKeeper:
    """Issues, stores, renews and publishes (caBundle) the webhook serving certificate."""

    def __init__(self, client: KubeClient, settings: CertSettings, *, clock: Clock = pki.utc_now) -> None:
        self.client = client
        self.settings = settings
        self.clock = clock
        self.serving = ServingCertificate()
        self.bundle: CertBundle | None = None

    @property
    def _secret_path(self) -> str:
        return core_path(self.settings.namespace, "secrets", self.settings.secret)

    async def ensure(self) -> CertBundle:
        """Make the Secret hold a good certificate, publish its CA, then serve it."""
        for _attempt in range(5):
            secret = await self.client.get(self._secret_path)
            if secret is None:
                raise LookupError(
                    f"secret {self.settings.namespace}/{self.settings.secret} is missing "
                    "(the Helm chart creates it; the operator only fills it)"
                )
            stored = CertBundle.from_secret_data(secret.get("data"))
            now = self.clock()
            reason = renewal_reason(stored, self.settings.hosts, now, self.settings.renew_before)
            if reason is None and stored is not None:
                bundle = stored
                break
            log.info("issuing the webhook serving certificate: %s", reason)
            bundle = issue(self.settings.hosts, now, self.settings, stored)
            try:
                await self.client.replace(self._secret_path, {**secret, "data": bundle.to_secret_data()})
                break
            except Conflict:
                continue  # someone else wrote it; look again
        else:
            raise RuntimeError(f"secret {self.settings.secret}: kept conflicting")
        await self.publish_ca(bundle.ca_bundle(self.clock()))
        if bundle != self.bundle:
            self.serving.load(bundle.cert, bundle.key)
            self.bundle = bundle
        return bundle

    async def publish_ca(self, ca_bundle: bytes) -> None:
        """Set caBundle on every webhook of the configurations (only where it differs)."""
        encoded = base64.b64encode(ca_bundle).decode()
        for kind in WEBHOOK_CONFIGURATION_KINDS:
            for name in self.settings.configurations:
                path = f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}"
                config = await self.client.get(path)
                if config is None:
                    continue
                stale = [
                    {"name": hook["name"], "clientConfig": {"caBundle": encoded}}
                    for hook in config.get("webhooks") or []
                    if (hook.get("clientConfig") or {}).get("caBundle") != encoded
                ]
                if stale:
                    await self.client.request(
                        "PATCH", path, body={"webhooks": stale}, content_type=STRATEGIC_MERGE_PATCH
                    )
                    log.info("caBundle of %s %s updated (%d webhooks)", kind, name, len(stale))

    async def run(self) -> None:
        """Check now, then every check interval (and retry a failed check sooner)."""
        while True:
            try:
                await self.ensure()
                delay = self.settings.check_interval_s
            except Exception:
                log.exception("webhook certificate check failed")
                delay = min(30.0, self.settings.check_interval_s)
            await asyncio.sleep(delay)
