"""The local control plane's certificate files (issued with `rayquota.pki`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from rayquota import pki

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


def _write_key(key: pki.Key, path: Path) -> None:
    path.write_bytes(pki.key_pem(key))
    path.chmod(0o600)


def ensure_pki(directory: Path) -> PkiFiles:
    """Create a CA, the apiserver's serving cert, an admin client cert and the SA key once."""
    files = PkiFiles.under(directory)
    if files.complete():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = pki.issue_ca("rayquota-local-ca", validity=_VALIDITY)
    _write_key(ca_key, files.ca_key)
    files.ca_cert.write_bytes(pki.cert_pem(ca_cert))

    server_key = pki.new_key()
    server_cert = pki.issue_leaf(
        pki.name("kube-apiserver"),
        server_key,
        ca_cert,
        ca_key,
        validity=_VALIDITY,
        hosts=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "127.0.0.1",
            "10.96.0.1",
        ),
    )
    _write_key(server_key, files.apiserver_key)
    files.apiserver_cert.write_bytes(pki.cert_pem(server_cert))

    # system:masters: every local component and the user act as cluster admin.
    admin_key = pki.new_key()
    admin_cert = pki.issue_leaf(
        pki.name("rayquota-admin", "system:masters"),
        admin_key,
        ca_cert,
        ca_key,
        validity=_VALIDITY,
        client=True,
    )
    _write_key(admin_key, files.admin_key)
    files.admin_cert.write_bytes(pki.cert_pem(admin_cert))

    sa_key = pki.new_key()
    _write_key(sa_key, files.sa_key)
    files.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return files


FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class FrontProxyFiles:
    """The aggregation layer's own CA and the client certificate the API server proxies with to
    aggregated APIs (kept apart from the cluster CA, as kubeadm does)."""

    ca_cert: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def under(cls, directory: Path) -> FrontProxyFiles:
        return cls(
            ca_cert=directory / "front-proxy-ca.crt",
            client_cert=directory / "front-proxy-client.crt",
            client_key=directory / "front-proxy-client.key",
        )

    def complete(self) -> bool:
        return all(p.is_file() for p in vars(self).values())

    def apiserver_flags(self) -> list[str]:
        return [
            f"--requestheader-client-ca-file={self.ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={self.client_cert}",
            f"--proxy-client-key-file={self.client_key}",
        ]


def ensure_front_proxy(directory: Path) -> FrontProxyFiles:
    """Create the front-proxy CA and client certificate once (beside an older state directory's
    files too: the cluster CA and the service-account key stay as they are)."""
    files = FrontProxyFiles.under(directory)
    if files.complete():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = pki.issue_ca("rayquota-front-proxy-ca", validity=_VALIDITY)
    files.ca_cert.write_bytes(pki.cert_pem(ca_cert))
    client_key = pki.new_key()
    client_cert = pki.issue_leaf(
        pki.name(FRONT_PROXY_CLIENT), client_key, ca_cert, ca_key, validity=_VALIDITY, client=True
    )
    _write_key(client_key, files.client_key)
    files.client_cert.write_bytes(pki.cert_pem(client_cert))
    return files
