"""Certificates and keys, issued one way for every part of rayquota.

The local control plane (its CA, the API server's serving certificate, the admin client
certificate: `rayquota.localcluster.pki`) and the operator's admission webhooks (a throw-away CA
for a loopback server, or the CA and serving certificate the leader keeps in a Secret:
`rayquota.operator.webhooks.certificates`) both issue through these functions. ECDSA P-256
keys: fast to generate, accepted by every Kubernetes component.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey

# Certificates start this long before "now": the API server's clock may be behind ours.
BACKDATE = dt.timedelta(minutes=5)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def name(common_name: str, organization: str | None = None) -> x509.Name:
    """A subject; the organization is the group Kubernetes reads off a client certificate."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, now: dt.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
    )


def issue_ca(
    common_name: str, *, validity: dt.timedelta, now: dt.datetime | None = None
) -> tuple[x509.Certificate, Key]:
    """A self-signed CA that signs leaf certificates only."""
    now = now or utc_now()
    key = new_key()
    subject = name(common_name)
    cert = (
        _builder(subject, subject, now)
        .not_valid_after(now + validity)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue_leaf(
    subject: x509.Name,
    key: Key,
    ca_cert: x509.Certificate,
    ca_key: Key,
    *,
    validity: dt.timedelta,
    hosts: tuple[str, ...] = (),
    client: bool = False,
    now: dt.datetime | None = None,
) -> x509.Certificate:
    """A serving certificate for `hosts` (DNS names and IP addresses), or a client certificate,
    signed by the CA; it never outlives the CA."""
    now = now or utc_now()
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _builder(subject, ca_cert.subject, now)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False
        )
    return builder.sign(ca_key, hashes.SHA256())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: Key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_key(pem: bytes) -> Key:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an ECDSA private key")
    return key


def load_serving_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Serve `cert` with `key` from `context` (new handshakes use them). The ssl module reads
    keys from files only: the key lives in a private temporary directory for this call alone."""
    with tempfile.TemporaryDirectory(prefix="rayquota-cert-") as folder:
        cert_file, key_file = Path(folder) / "tls.crt", Path(folder) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        context.load_cert_chain(cert_file, key_file)


def server_context() -> ssl.SSLContext:
    return ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
