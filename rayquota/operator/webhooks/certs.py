"""A throw-away CA and a serving certificate for 127.0.0.1, made at start-up, never written
anywhere but a private temporary directory (the ssl module loads keys from files)."""

from __future__ import annotations

import base64
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from rayquota.localcluster.pki import _key, _name, _signed


@dataclass(frozen=True)
class ServingCert:
    context: ssl.SSLContext
    ca_bundle: str
    """base64 PEM of the CA, for the webhook configurations' caBundle"""


def serving_cert(host: str = "127.0.0.1") -> ServingCert:
    ca_key, key = _key(), _key()
    ca_name = _name("rayquota-webhook-ca")
    ca = _signed(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    cert = _signed(
        _name(host), key.public_key(), ca_name, ca_key, server_ips=(host,), server_names=("localhost",)
    )
    with tempfile.TemporaryDirectory(prefix="rayquota-webhook-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_path, key_path)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    return ServingCert(context, base64.b64encode(ca_pem).decode())
