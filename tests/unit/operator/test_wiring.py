"""The operator's wiring: which components run, with which webhook settings, said once each."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayquota.cli import _webhooks, build_parser
from rayquota.localcluster.paths import is_local_kubeconfig
from rayquota.operator.components import setup_components
from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.kube import KubeClient
from rayquota.operator.webhook_settings import CertificateSource, WebhookSettings
from tests.config_env import operator_config_from_env, webhooks_from_env


def offline_manager() -> Manager:
    import kubernetes.client

    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted
    return Manager(KubeClient(configuration), NamespaceScope.of(None))


def offline(config: OperatorConfig) -> tuple[Manager, str]:
    manager = offline_manager()
    return manager, setup_components(manager, config).describe()


def test_the_start_up_line_names_each_component_once() -> None:
    _, described = offline(OperatorConfig(webhooks=WebhookSettings.loopback(8443)))
    assert described == (
        "ray (with RayCronJob), queue, webhooks (https://127.0.0.1:8443, generated certificate)"
    )
    _, described = offline(
        OperatorConfig(queue_enabled=False, feature_gates=FeatureGates.parse("RayCronJob=false"))
    )
    assert described == "ray"
    _, described = offline(OperatorConfig(reconcilers_enabled=False))
    assert described == "queue"


def test_one_webhook_server_whatever_the_certificate() -> None:
    manager, _ = offline(OperatorConfig(webhooks=WebhookSettings.loopback(8443)))
    assert [name for name, _ in manager._runnables].count("admission webhooks") == 1


def test_no_webhook_settings_without_the_environment() -> None:
    assert webhooks_from_env({}) is None
    assert operator_config_from_env({}).webhooks is None


def test_loopback_webhooks_from_the_development_switch() -> None:
    settings = webhooks_from_env({"RAYQUOTA_WEBHOOK_PORT": "0"})
    assert settings == WebhookSettings(CertificateSource.GENERATED, 0)
    assert settings.registers_configurations


def test_the_charts_webhooks_take_the_certificate_it_names() -> None:
    chart = {"RAYQUOTA_WEBHOOK_LISTEN_PORT": "9443", "RAYQUOTA_BIND_ADDRESS": "0.0.0.0"}
    secret = webhooks_from_env(
        {**chart, "RAYQUOTA_WEBHOOK_CERT_SECRET": "cert", "RAYQUOTA_WEBHOOK_HOSTS": "svc.ns.svc"}
    )
    assert secret is not None and secret.certificate is CertificateSource.SECRET
    assert (secret.port, secret.bind, secret.keeper is not None) == (9443, "0.0.0.0", True)
    assert not secret.registers_configurations
    files = webhooks_from_env({**chart, "RAYQUOTA_WEBHOOK_CERT_DIR": "/etc/cert"})
    assert (
        files is not None and files.certificate is CertificateSource.FILES and files.cert_dir == "/etc/cert"
    )
    with pytest.raises(ValueError, match=r"RAYQUOTA_WEBHOOK_CERT_SECRET.*RAYQUOTA_WEBHOOK_CERT_DIR"):
        webhooks_from_env(chart)


def test_a_keeper_without_a_port_keeps_the_secret_only() -> None:
    settings = webhooks_from_env({"RAYQUOTA_WEBHOOK_CERT_SECRET": "cert", "RAYQUOTA_WEBHOOK_HOSTS": "h"})
    assert settings is not None and settings.port is None and settings.keeper is not None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAYQUOTA_WEBHOOK_PORT": "https"}, "RAYQUOTA_WEBHOOK_PORT='https'"),
        ({"RAYQUOTA_WEBHOOK_LISTEN_PORT": "70000"}, "RAYQUOTA_WEBHOOK_LISTEN_PORT='70000'"),
        ({"RAYQUOTA_WEBHOOK_PORT": "0", "RAYQUOTA_WEBHOOK_LISTEN_PORT": "9443"}, "both set"),
    ],
)
def test_bad_webhook_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        webhooks_from_env(env)


def test_only_a_local_control_planes_admin_kubeconfig_counts_as_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUOTA_STATE_DIR", str(tmp_path / "clusters"))
    assert is_local_kubeconfig(tmp_path / "clusters" / "dev" / "kubeconfig")
    assert not is_local_kubeconfig(tmp_path / "elsewhere" / "kubeconfig")
    assert not is_local_kubeconfig(tmp_path / "clusters" / "dev" / "sa-kubeconfig")


@pytest.mark.parametrize(
    ("flag", "local", "expected"),
    [
        (None, True, WebhookSettings.loopback()),  # `make run`: on by default
        (None, False, None),  # a real cluster: as the environment (the chart) says
        (False, True, None),  # --no-webhooks
        (True, False, WebhookSettings.loopback()),  # --webhooks
    ],
)
def test_rayquota_run_serves_loopback_webhooks_on_the_local_control_plane(
    flag: bool | None,
    local: bool,
    expected: WebhookSettings | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAYQUOTA_STATE_DIR", str(tmp_path / "clusters"))
    kubeconfig = tmp_path / ("clusters/dev" if local else "remote") / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert _webhooks(flag, OperatorConfig()) == expected


def test_the_environment_wins_unless_webhooks_are_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUOTA_STATE_DIR", str(tmp_path / "clusters"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "clusters" / "dev" / "kubeconfig"))
    chart = OperatorConfig(webhooks=WebhookSettings(CertificateSource.FILES, 9443, cert_dir="/c"))
    assert _webhooks(None, chart) == chart.webhooks
    assert _webhooks(False, chart) is None


@pytest.mark.parametrize(
    ("argv", "expected"), [([], None), (["--no-webhooks"], False), (["--webhooks"], True)]
)
def test_run_webhooks_flag(argv: list[str], expected: bool | None) -> None:
    assert build_parser().parse_args(["run", *argv]).webhooks is expected


@pytest.mark.parametrize("gate", [True, False])
def test_the_webhooks_accept_network_policy_exactly_when_its_feature_gate_is_on(gate: bool) -> None:
    """Issue 34: the webhook server is told what the feature gates turn on, in both modes."""
    for reconcilers in (True, False):
        config = OperatorConfig(
            reconcilers_enabled=reconcilers,
            webhooks=WebhookSettings.loopback(8443),
            feature_gates=FeatureGates.parse(f"RayClusterNetworkPolicy={str(gate).lower()}"),
        )
        manager = offline_manager()
        components = setup_components(manager, config)
        assert components.webhooks is not None and components.webhooks.server is not None
        expected = frozenset({"networkPolicy"}) if gate else frozenset()
        assert components.webhooks.server.allowed_security_fields == expected
