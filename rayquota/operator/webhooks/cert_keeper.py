"""The webhook serving certificate without cert-manager.

The leader keeps a CA and a serving certificate in a Secret of its own namespace, renews them
before they expire, and keeps the caBundle of its webhook configurations current. When the CA
itself is renewed, the caBundle carries the old and the new CA until the old one expires, so the
API server trusts the certificate served before and after the switch.

With cert-manager (the chart's `webhooks.certManager.enabled`) the certificate arrives as files
in a mounted Secret instead (`RAYQUOTA_WEBHOOK_CERT_DIR`) and cert-manager injects the caBundle.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager
from rayquota.operator.kube import Conflict, KubeClient, core_path

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


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class CertSettings:
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


def _split(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


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
        ca_cert_pem, ca_key_pem = _new_ca(now, settings.ca_validity)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + settings.cert_validity, ca_cert.not_valid_after_utc)
    cert = (
        _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])]), ca_cert.subject, now)
        .not_valid_after(not_after)
        .public_key(key.public_key())
        .add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_cert=ca_cert_pem,
        ca_key=ca_key_pem,
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=_key_pem(key),
        previous_ca_cert=previous,
    )


def _new_ca(now: dt.datetime, validity: dt.timedelta) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"rayquota-webhook-ca-{now:%Y%m%d%H%M%S}")])
    cert = (
        _builder(name, name, now)
        .not_valid_after(now + validity)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _builder(subject: x509.Name, issuer: x509.Name, now: dt.datetime) -> x509.CertificateBuilder:
    # Backdated a little: the API server's clock may be behind ours.
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class ServingCertificate:
    """One SSLContext whose certificate is swapped in place: new handshakes use the new one."""

    def __init__(self) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.loaded = asyncio.Event()

    def load(self, cert: bytes, key: bytes) -> None:
        # load_cert_chain reads files only; the key never lives on disk longer than this call.
        with tempfile.TemporaryDirectory(prefix="rayquota-cert-") as folder:
            cert_file, key_file = Path(folder) / "tls.crt", Path(folder) / "tls.key"
            cert_file.write_bytes(cert)
            key_file.touch(mode=0o600)
            key_file.write_bytes(key)
            self.context.load_cert_chain(cert_file, key_file)
        self.loaded.set()


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

    def __init__(self, client: KubeClient, settings: CertSettings, *, clock: Clock = utc_now) -> None:
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


def setup(manager: Manager, config: OperatorConfig) -> CertificateKeeper | None:
    """Keep the certificate when RAYQUOTA_WEBHOOK_CERT_SECRET names its Secret. The webhook server
    serves `manager.components["webhook-certs"].serving.context` once `.serving.loaded` is set."""
    del config
    settings = CertSettings.from_env()
    if settings is None:
        return None
    keeper = CertificateKeeper(manager.client, settings)
    manager.add_runnable("webhook certificates", keeper.run)
    manager.components["webhook-certs"] = keeper
    return keeper

