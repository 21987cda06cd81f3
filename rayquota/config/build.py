"""The runtime settings each component takes, built from the validated configuration. The checks
that span keys live here, each error naming the keys."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

from rayquota.config import overrides
from rayquota.config.loader import ConfigError, Loaded
from rayquota.config.model import Configuration
from rayquota.dashboard.settings import DashboardSettings, checked_prometheus_url
from rayquota.operator.config import OperatorConfig
from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.leader import LeaseSettings
from rayquota.operator.queue.admission.pods_ready import WaitForPodsReady
from rayquota.operator.queue.dra.settings import DraSettings, mappings_from
from rayquota.operator.queue.multikueue.settings import Dispatcher, MultiKueueSettings
from rayquota.operator.queue.naming import QueueSettings
from rayquota.operator.queue.settings import QueueConfig
from rayquota.operator.visibility.settings import VisibilitySettings
from rayquota.operator.webhook_settings import CertificateSource, CertSettings, WebhookSettings
from rayquota.queueing.queue_order import RequeuingTimestamp
from rayquota.queueing.quota.admission_fair_sharing import AdmissionFairSharing
from rayquota.queueing.quota.fairsharing import FairSharing

DEFAULT_NAMESPACE = "default"


def named(key: str) -> str:
    """A key, with the environment variable that overrides it: an error names both."""
    override = overrides.BY_KEY.get(key)
    return f"{key} ({override.variable})" if override else key


@dataclass(frozen=True)
class Settings:
    """Everything `rayquota run` starts with."""

    operator: OperatorConfig
    lease: LeaseSettings | None
    """None: no leader election (leaderElection.leaderElect false)."""
    dashboard: DashboardSettings | None
    bind_address: str
    log_format: str
    metrics_port: int
    health_port: int


def _port_of(key: str, address: str) -> int:
    """Kueue's bind addresses (":8080", "0.0.0.0:8080"); "0" or "" turns the server off."""
    text = address.strip()
    if text in ("", "0"):
        return 0
    _, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError([f"{key}: expected an address such as :8080 (or 0 for off), got {address!r}"])
    return int(port)


def _wait_for_pods_ready(config: Configuration) -> WaitForPodsReady | None:
    section = config.waitForPodsReady
    if section is None or not section.enable:
        return None
    strategy = section.requeuingStrategy
    return WaitForPodsReady(
        timeout_s=section.timeout,
        recovery_timeout_s=section.recoveryTimeout,
        block_admission=section.blockAdmission,
        requeuing_timestamp=RequeuingTimestamp(strategy.timestamp),
        backoff_limit_count=strategy.backoffLimitCount,
        backoff_base_s=strategy.backoffBaseSeconds,
        backoff_max_s=strategy.backoffMaxSeconds,
    )


def _multikueue(config: Configuration) -> MultiKueueSettings | None:
    section = config.multiKueue
    if section is None or not section.enable:
        return None
    return MultiKueueSettings(
        worker_lost_timeout_s=section.workerLostTimeout,
        gc_interval_s=section.gcInterval,
        origin=section.origin,
        dispatcher=Dispatcher(section.dispatcherName.value),
        namespace=section.namespace or config.namespace or MultiKueueSettings.namespace,
        probe_interval_s=section.probeInterval,
        nomination_timeout_s=section.nominationTimeout,
        kubeconfig_path_prefix=section.kubeconfigPathPrefix,
        incremental_step=section.incrementalDispatcherConfig.stepSize,
        incremental_round_s=section.incrementalRoundTimeout,
    )


def _cert_keeper(config: Configuration) -> CertSettings | None:
    section = config.internalCertManagement
    if section is None or not section.enable or not section.webhookSecretName:
        return None
    if not section.hosts:
        key = named("internalCertManagement.hosts")
        raise ConfigError([f"{key}: no host for the webhook serving certificate"])
    return CertSettings(
        namespace=config.namespace or DEFAULT_NAMESPACE,
        secret=section.webhookSecretName,
        hosts=tuple(section.hosts),
        configurations=tuple(section.configurations),
    )


def webhooks(config: Configuration) -> WebhookSettings | None:
    """Where the admission webhooks are served and where their certificate comes from."""
    keeper, hook = _cert_keeper(config), config.webhook
    if hook.port is not None and hook.loopbackPort is not None:
        raise ConfigError(
            [
                f"{named('webhook.port')} (the chart's webhooks) and {named('webhook.loopbackPort')} "
                "(loopback webhooks for a local control plane) are both set: set one"
            ]
        )
    bind = hook.host or config.bindAddress
    if hook.port is not None:
        if keeper is not None:
            return WebhookSettings(CertificateSource.SECRET, hook.port, bind, keeper=keeper)
        if not hook.certDir:
            raise ConfigError(
                [
                    f"{named('webhook.port')} needs a certificate: "
                    f"{named('internalCertManagement.webhookSecretName')} (issued by the operator) or "
                    f"{named('webhook.certDir')} (cert-manager's files)"
                ]
            )
        return WebhookSettings(CertificateSource.FILES, hook.port, bind, cert_dir=hook.certDir)
    if hook.loopbackPort is not None:
        return WebhookSettings.loopback(hook.loopbackPort)
    if keeper is not None:
        return WebhookSettings(CertificateSource.SECRET, None, keeper=keeper)
    return None


def _feature_gates(raw: str) -> FeatureGates:
    try:
        return FeatureGates.parse(raw)
    except ValueError as exc:
        raise ConfigError([f"{named('kuberay.featureGates')}: {exc}"]) from None


def _fair_sharing(config: Configuration) -> FairSharing | bool:
    """Kueue's fairSharing: off, or on with its preemption strategies (validated on load)."""
    fair = config.fairSharing
    if fair is None or not fair.enable:
        return False
    return FairSharing.parse(fair.preemptionStrategies)


def _admission_fair_sharing(config: Configuration) -> AdmissionFairSharing | None:
    """Kueue's admissionFairSharing (off also with Kueue's feature gate AdmissionFairSharing: false)."""
    section = config.admissionFairSharing
    if section is None or (config.featureGates or {}).get("AdmissionFairSharing") is False:
        return None
    return AdmissionFairSharing(
        usage_half_life_time=section.usageHalfLifeTime,
        usage_sampling_interval=section.usageSamplingInterval,
        resource_weights=dict(section.resourceWeights),
    )


def _dra(config: Configuration) -> DraSettings:
    """Kueue's resources.deviceClassMappings and its two DRA gates (rayquota's queue.dra)."""
    mappings = config.resources.deviceClassMappings if config.resources is not None else []
    try:
        parsed = mappings_from(mappings)
    except ValueError as error:
        raise ConfigError([str(error)]) from None
    dra = config.queue.dra
    return DraSettings(parsed, dra.integration, dra.rejectWorkloadsWhenDisabled)


def visibility(config: Configuration) -> VisibilitySettings | None:
    """Where the pending-workloads API is served; None: not (or not yet: `rayquota run` serves it
    on loopback against the local control plane unless `visibility.enable` is false)."""
    section = config.visibility
    if section.enable is False:
        return None
    if section.port is not None and section.loopbackPort is not None:
        raise ConfigError(
            [
                f"{named('visibility.port')} (the chart's APIService) and {named('visibility.loopbackPort')} "
                "(registered by the operator for a local control plane) are both set: set one"
            ]
        )
    if section.port is not None:
        bind = section.host or config.bindAddress
        return VisibilitySettings(section.port, bind, loopback=False, cert_dir=section.certDir)
    if section.loopbackPort is not None:
        return VisibilitySettings(section.loopbackPort)
    if section.enable:
        return VisibilitySettings(0)
    return None


def _frameworks(config: Configuration) -> tuple[str, ...] | None:
    """``integrations.frameworks`` as written (None when unset: every kind is queued)."""
    integrations = config.integrations
    if integrations is None or integrations.frameworks is None:
        return None
    return tuple(integrations.frameworks)


def operator_config(config: Configuration, local_time_zone: dt.tzinfo | None = None) -> OperatorConfig:
    kuberay, ray_dashboard = config.kuberay, config.rayDashboard
    defaults = OperatorConfig()
    queue = QueueConfig(
        labels=QueueSettings(
            queue_label_keys=tuple(config.queue.queueLabelKeys),
            priority_label_keys=tuple(config.queue.priorityLabelKeys),
            manage_jobs_without_queue_name=config.manageJobsWithoutQueueName,
            dra=_dra(config),
        ),
        api_mode=config.queue.api,
        fair_sharing=_fair_sharing(config),
        admission_fair_sharing=_admission_fair_sharing(config),
        wait_for_pods_ready=_wait_for_pods_ready(config),
        frameworks=_frameworks(config),
    )
    return dataclasses.replace(
        defaults,
        version=config.operatorVersion or defaults.version,
        dashboard_resolver=ray_dashboard.resolver,
        dashboard_url=ray_dashboard.url or None,
        dashboard_map_file=ray_dashboard.mapFile or None,
        cluster_domain=kuberay.clusterDomain,
        submitter_image=kuberay.submitterImage,
        resync_interval_s=config.controller.resyncInterval,
        dashboard_timeout_s=ray_dashboard.timeout,
        workers=config.controller.workers,
        rayjob_stop_timeout_s=kuberay.rayJobStopTimeout,
        reconcilers_enabled=kuberay.reconcilersEnabled,
        webhooks=webhooks(config),
        visibility=visibility(config),
        queue_enabled=config.queue.enable,
        feature_gates=_feature_gates(kuberay.featureGates),
        kuberay_metrics=kuberay.metrics,
        multikueue=_multikueue(config),
        queue=queue,
        created_by=kuberay.createdByLabel,
        gcs_ft_redis_cleanup=kuberay.gcsFtRedisCleanup,
        use_ingress_on_openshift=kuberay.useIngressOnOpenShift,
        local_time_zone=local_time_zone,
    )


def lease(config: Configuration) -> LeaseSettings | None:
    """A duration given without the periods scales them (1/3 renew, 2/3 deadline, 2/15 retry)."""
    section = config.leaderElection
    if not section.leaderElect:
        return None
    duration = section.leaseDuration or LeaseSettings.duration_s
    try:
        return LeaseSettings(
            name=section.resourceName,
            namespace=section.resourceNamespace or config.namespace or DEFAULT_NAMESPACE,
            duration_s=duration,
            renew_period_s=section.renewPeriod or duration / 3,
            renew_deadline_s=section.renewDeadline or duration * 2 / 3,
            retry_period_s=section.retryPeriod or duration * 2 / 15,
        )
    except ValueError as exc:
        raise ConfigError([f"leaderElection (RAYQUOTA_LEASE_*): {exc}"]) from None


def dashboard(config: Configuration) -> DashboardSettings | None:
    section = config.dashboard
    if section.port is None:
        return None
    try:
        prometheus = checked_prometheus_url(section.prometheusUrl, named("dashboard.prometheusUrl"))
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    return DashboardSettings(
        bind=section.bindAddress,
        port=section.port,
        allowed_origins=tuple(section.allowedOrigins),
        prometheus_url=prometheus,
    )


def settings(loaded: Loaded, local_time_zone: dt.tzinfo | None = None) -> Settings:
    config = loaded.configuration
    return Settings(
        operator=operator_config(config, local_time_zone),
        lease=lease(config),
        dashboard=dashboard(config),
        bind_address=config.bindAddress,
        log_format=config.logFormat,
        metrics_port=_port_of("metrics.bindAddress", config.metrics.bindAddress),
        health_port=_port_of("health.healthProbeBindAddress", config.health.healthProbeBindAddress),
    )
