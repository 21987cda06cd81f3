"""The webhook serving certificate: issue, renew, rotate the CA without a window, publish the caBundle."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import ssl
from typing import Any

import pytest
from cryptography import x509

from rayquota.operator.kube import Conflict
from rayquota.operator.webhook_settings import CertSettings
from rayquota.operator.webhooks.cert_keeper import CertBundle, CertificateKeeper, issue, renewal_reason
from tests.config_env import cert_settings_from_env

NOW = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
HOSTS = ("rq-rayquota-webhook.ops.svc", "127.0.0.1")
SETTINGS = CertSettings(namespace="ops", secret="cert", hosts=HOSTS, configurations=("rq",))


def cert_of(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_settings_come_from_the_environment() -> None:
    assert cert_settings_from_env({}) is None
    settings = cert_settings_from_env(
        {
            "RAYQUOTA_WEBHOOK_CERT_SECRET": "cert",
            "RAYQUOTA_WEBHOOK_HOSTS": "a.ops.svc, 127.0.0.1",
            "RAYQUOTA_WEBHOOK_CONFIGURATIONS": "rq",
            "RAYQUOTA_OPERATOR_NAMESPACE": "ops",
        }
    )
    assert settings is not None
    assert (settings.namespace, settings.hosts, settings.configurations) == (
        "ops",
        ("a.ops.svc", "127.0.0.1"),
        ("rq",),
    )
    with pytest.raises(ValueError, match="RAYQUOTA_WEBHOOK_HOSTS"):
        cert_settings_from_env({"RAYQUOTA_WEBHOOK_CERT_SECRET": "cert"})


def test_an_issued_certificate_covers_the_hosts_and_is_signed_by_the_ca() -> None:
    bundle = issue(HOSTS, NOW, SETTINGS)
    cert, ca = cert_of(bundle.cert), cert_of(bundle.ca_cert)
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [HOSTS[0]]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == [HOSTS[1]]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_after_utc == NOW + SETTINGS.cert_validity
    assert renewal_reason(bundle, HOSTS, NOW, SETTINGS.renew_before) is None


def test_renewal_reasons() -> None:
    bundle = issue(HOSTS, NOW, SETTINGS)
    assert renewal_reason(None, HOSTS, NOW, SETTINGS.renew_before) == "no certificate yet"
    late = NOW + SETTINGS.cert_validity - SETTINGS.renew_before + dt.timedelta(days=1)
    assert "serving certificate expires" in (renewal_reason(bundle, HOSTS, late, SETTINGS.renew_before) or "")
    assert "covers" in (renewal_reason(bundle, ("other.svc",), NOW, SETTINGS.renew_before) or "")
    foreign = issue(HOSTS, NOW, SETTINGS)
    mixed = CertBundle(bundle.ca_cert, bundle.ca_key, foreign.cert, foreign.key)
    assert "not issued by the stored CA" in (renewal_reason(mixed, HOSTS, NOW, SETTINGS.renew_before) or "")


def test_renewing_the_serving_certificate_keeps_the_ca() -> None:
    first = issue(HOSTS, NOW, SETTINGS)
    later = NOW + dt.timedelta(days=300)
    renewed = issue(HOSTS, later, SETTINGS, first)
    assert renewed.ca_cert == first.ca_cert and renewed.cert != first.cert
    assert renewed.ca_bundle(later) == first.ca_cert


def test_a_ca_rotation_trusts_old_and_new_until_the_old_expires() -> None:
    first = issue(HOSTS, NOW, SETTINGS)
    near_ca_expiry = NOW + SETTINGS.ca_validity - dt.timedelta(days=10)
    assert "the CA expires" in (renewal_reason(first, HOSTS, near_ca_expiry, SETTINGS.renew_before) or "")
    rotated = issue(HOSTS, near_ca_expiry, SETTINGS, first)
    assert rotated.ca_cert != first.ca_cert
    assert rotated.previous_ca_cert == first.ca_cert
    assert rotated.ca_bundle(near_ca_expiry) == rotated.ca_cert + first.ca_cert
    after_old_expiry = NOW + SETTINGS.ca_validity + dt.timedelta(days=1)
    assert rotated.ca_bundle(after_old_expiry) == rotated.ca_cert


def test_secret_data_round_trip() -> None:
    bundle = issue(HOSTS, NOW, SETTINGS)
    assert CertBundle.from_secret_data(bundle.to_secret_data()) == bundle
    assert CertBundle.from_secret_data({}) is None
    assert CertBundle.from_secret_data(None) is None


class FakeApi:
    """Just enough of KubeClient for the keeper: a Secret and two webhook configurations."""

    def __init__(self) -> None:
        hooks = [{"name": "a.rayquota.io", "clientConfig": {}}, {"name": "b.rayquota.io", "clientConfig": {}}]
        prefix = "/apis/admissionregistration.k8s.io/v1"
        self.objects: dict[str, dict[str, Any]] = {
            "/api/v1/namespaces/ops/secrets/cert": {"metadata": {"name": "cert", "resourceVersion": "1"}},
            f"{prefix}/mutatingwebhookconfigurations/rq": {"webhooks": copy.deepcopy(hooks)},
            f"{prefix}/validatingwebhookconfigurations/rq": {"webhooks": copy.deepcopy(hooks)},
        }
        self.writes: list[str] = []
        self.conflicts = 0

    async def get(self, path: str) -> dict[str, Any] | None:
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("PUT", path, 409, "conflict")
        self.writes.append(f"PUT {path}")
        self.objects[path] = copy.deepcopy(body)
        return body

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str | None = None
    ) -> Any:
        assert (method, content_type) == ("PATCH", "application/strategic-merge-patch+json")
        self.writes.append(f"PATCH {path}")
        by_name = {h["name"]: h for h in self.objects[path]["webhooks"]}
        for hook in body["webhooks"]:
            by_name[hook["name"]]["clientConfig"].update(hook["clientConfig"])
        return self.objects[path]


def keeper_on(api: FakeApi, now: dt.datetime = NOW) -> CertificateKeeper:
    return CertificateKeeper(api, SETTINGS, clock=lambda: now)  # type: ignore[arg-type]


async def test_the_keeper_fills_the_secret_publishes_the_ca_then_stays_quiet() -> None:
    api = FakeApi()
    api.conflicts = 1  # another writer got there first once: the keeper looks again
    bundle = await keeper_on(api).ensure()
    stored = api.objects["/api/v1/namespaces/ops/secrets/cert"]["data"]
    assert CertBundle.from_secret_data(stored) == bundle
    encoded = base64.b64encode(bundle.ca_cert).decode()
    for path, config in api.objects.items():
        if "webhookconfigurations" in path:
            assert [h["clientConfig"]["caBundle"] for h in config["webhooks"]] == [encoded, encoded]
    assert len(api.writes) == 3
    # A second keeper (a restarted leader) finds everything in order and writes nothing.
    api.writes.clear()
    again = keeper_on(api)
    assert await again.ensure() == bundle
    assert api.writes == []
    assert again.serving.loaded.is_set()


async def test_a_missing_secret_says_who_creates_it() -> None:
    api = FakeApi()
    del api.objects["/api/v1/namespaces/ops/secrets/cert"]
    with pytest.raises(LookupError, match="the Helm chart creates it"):
        await keeper_on(api).ensure()


async def _handshake(server_context: ssl.SSLContext, trusted: bytes, host: str) -> None:
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cadata=trusted.decode())
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=host)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_the_served_certificate_is_swapped_in_place_across_a_ca_rotation() -> None:
    # Short lifetimes so the CA nears its end now, with certificates valid at the real time.
    settings = CertSettings(
        namespace="ops",
        secret="cert",
        hosts=HOSTS,
        configurations=("rq",),
        ca_validity=dt.timedelta(days=100),
        cert_validity=dt.timedelta(days=95),
        renew_before=dt.timedelta(days=90),
    )
    now = dt.datetime.now(dt.UTC)
    api = FakeApi()
    keeper = CertificateKeeper(api, settings, clock=lambda: now - dt.timedelta(days=11))  # type: ignore[arg-type]
    first = await keeper.ensure()
    context = keeper.serving.context
    await _handshake(context, first.ca_bundle(now), HOSTS[0])
    # Eleven days on the CA has less than renew_before left: a new CA signs a new certificate,
    # and a client holding the published bundle (old + new CA) trusts what is served.
    keeper.clock = lambda: now
    rotated = await keeper.ensure()
    assert rotated.ca_cert != first.ca_cert
    assert rotated.previous_ca_cert == first.ca_cert
    assert keeper.serving.context is context
    await _handshake(context, rotated.ca_bundle(now), HOSTS[0])
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(context, first.ca_cert, HOSTS[0])  # the old CA alone no longer suffices
