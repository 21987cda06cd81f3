"""Certificates and keys for the local control plane (ECDSA P-256: fast to generate)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class PkiFiles:
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path

    @classmethod
    def under(cls, directory: Path) -> PkiFiles:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            apiserver_cert=directory / "apiserver.crt",
            apiserver_key=directory / "apiserver.key",
            admin_cert=directory / "admin.crt",
            admin_key=directory / "admin.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
        )

    def complete(self) -> bool:
        return all(p.is_file() for p in vars(self).values())


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _signed(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or server_ips:
        alt: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        alt += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def ensure_pki(directory: Path) -> PkiFiles:
    """Create a CA, the apiserver's serving cert, an admin client cert and the SA key once."""
    files = PkiFiles.under(directory)
    if files.complete():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("rayquota-local-ca")
    ca_cert = _signed(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    _write_key(ca_key, files.ca_key)
    _write_cert(ca_cert, files.ca_cert)

    server_key = _key()
    server_cert = _signed(
        _name("kube-apiserver"),
        server_key.public_key(),
        ca_name,
        ca_key,
        server_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        server_ips=("127.0.0.1", "10.96.0.1"),
    )
    _write_key(server_key, files.apiserver_key)
    _write_cert(server_cert, files.apiserver_cert)

    # system:masters: every local component and the user act as cluster admin.
    admin_key = _key()
    admin_cert = _signed(
        _name("rayquota-admin", "system:masters"), admin_key.public_key(), ca_name, ca_key, client=True
    )
    _write_key(admin_key, files.admin_key)
    _write_cert(admin_cert, files.admin_cert)

    sa_key = _key()
    _write_key(sa_key, files.sa_key)
    files.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return files
