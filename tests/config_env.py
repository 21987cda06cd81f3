"""The operator's settings from an environment alone (the documented overrides), through the one
configuration loader, for tests that used to call each module's own reader."""

from __future__ import annotations

from collections.abc import Mapping

from rayquota.config import build, load
from rayquota.dashboard.settings import DashboardSettings
from rayquota.operator.config import OperatorConfig
from rayquota.operator.leader import LeaseSettings
from rayquota.operator.queue.admission.pods_ready import WaitForPodsReady
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.queue.naming import QueueSettings
from rayquota.operator.webhook_settings import CertSettings, WebhookSettings


def operator_config_from_env(env: Mapping[str, str]) -> OperatorConfig:
    return build.operator_config(load(env=env).configuration)


def webhooks_from_env(env: Mapping[str, str]) -> WebhookSettings | None:
    return build.webhooks(load(env=env).configuration)


def cert_settings_from_env(env: Mapping[str, str]) -> CertSettings | None:
    settings = webhooks_from_env(env)
    return settings.keeper if settings is not None else None


def pods_ready_from_env(env: Mapping[str, str]) -> WaitForPodsReady | None:
    return operator_config_from_env(env).queue.wait_for_pods_ready


def queue_settings_from_env(env: Mapping[str, str]) -> QueueSettings:
    return operator_config_from_env(env).queue.labels


def multikueue_from_env(env: Mapping[str, str]) -> MultiKueueSettings | None:
    return operator_config_from_env(env).multikueue


def lease_from_env(env: Mapping[str, str]) -> LeaseSettings | None:
    return build.lease(load(env=env).configuration)


def dashboard_from_env(env: Mapping[str, str]) -> DashboardSettings | None:
    return build.dashboard(load(env=env).configuration)
