"""Operator settings, read once from environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata

from rayquota.dashboard.settings import DashboardSettings
from rayquota.operator import kuberay_env
from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.ray.labels import DEFAULT_CLUSTER_DOMAIN
from rayquota.operator.webhook_settings import WebhookSettings

DEFAULT_RAY_IMAGE = "rayproject/ray:2.41.0"


def _package_version() -> str:
    try:
        return metadata.version("rayquota")
    except metadata.PackageNotFoundError:
        return "0.0.0-dev"


@dataclass(frozen=True)
class OperatorConfig:
    # Recorded on every head pod; a change re-stamps pods and never recreates them.
    version: str = _package_version()
    # "service": the head Service's DNS name; "local": annotation / map file / default URL.
    dashboard_resolver: str = "service"
    dashboard_url: str | None = None
    dashboard_map_file: str | None = None
    # The cluster's DNS domain (KubeRay's CLUSTER_DOMAIN): the head's address in pods
    # (FQ_RAY_IP, --address), the operator's dashboard URL.
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    # Image of the K8sJobMode submitter Job when the RayJob gives no submitterPodTemplate.
    submitter_image: str = DEFAULT_RAY_IMAGE
    # How often every cached object is looked at again without a watch event (seconds); only a
    # safety net for lost events, never the way work gets done.
    resync_interval_s: float = 600.0
    dashboard_timeout_s: float = 5.0
    # Concurrent reconciles per controller.
    workers: int = 8
    # How long a deleted RayJob waits for its Ray job to stop before it is released anyway.
    rayjob_stop_timeout_s: float = 300.0
    # False: admission-only mode beside KubeRay's own operator. Our Ray reconcilers stay off and
    # the queue integration gates KubeRay's objects through spec.suspend alone.
    reconcilers_enabled: bool = True
    # The admission webhooks: None serves none (the gate still holds: the reconcilers re-assert
    # it and the planner creates no pod beyond the admitted caps).
    webhooks: WebhookSettings | None = None
    # The queue integration (and with it the webhooks). Off for a namespace-only install, whose
    # ServiceAccount may not read the cluster-scoped queue configuration (ClusterQueues, ...).
    queue_enabled: bool = True
    # KubeRay's operator feature gates (`--feature-gates` syntax); see feature_gates.py.
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    # KubeRay's control-plane metrics (kuberay_*) beside ours; KubeRay's chart `metrics.enabled`.
    kuberay_metrics: bool = True
    # The read-only web dashboard (rayquota.dashboard, not the Ray dashboard above) served by this
    # process; None serves none (`rayquota dashboard` runs it on its own).
    web_dashboard: DashboardSettings | None = None
    # The MultiKueue check controller (a manager cluster's dispatch to its workers); None: off.
    multikueue: MultiKueueSettings | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperatorConfig:
        env = os.environ if env is None else env
        defaults = cls()
        _refuse_unhonoured_settings(env)
        return cls(
            version=env.get("RAYQUOTA_OPERATOR_VERSION", defaults.version),
            dashboard_resolver=env.get("RAYQUOTA_DASHBOARD_RESOLVER", defaults.dashboard_resolver),
            dashboard_url=env.get("RAYQUOTA_DASHBOARD_URL") or None,
            dashboard_map_file=env.get("RAYQUOTA_DASHBOARD_MAP_FILE") or None,
            cluster_domain=kuberay_env.cluster_domain(env, defaults.cluster_domain),
            submitter_image=env.get("RAYQUOTA_SUBMITTER_IMAGE", defaults.submitter_image),
            resync_interval_s=float(env.get("RAYQUOTA_RESYNC_INTERVAL", defaults.resync_interval_s)),
            dashboard_timeout_s=float(env.get("RAYQUOTA_DASHBOARD_TIMEOUT", defaults.dashboard_timeout_s)),
            workers=int(env.get("RAYQUOTA_WORKERS", defaults.workers)),
            rayjob_stop_timeout_s=float(
                env.get("RAYQUOTA_RAYJOB_STOP_TIMEOUT", defaults.rayjob_stop_timeout_s)
            ),
            reconcilers_enabled=_flag(env, "RAYQUOTA_RECONCILERS_ENABLED", defaults.reconcilers_enabled),
            queue_enabled=_flag(env, "RAYQUOTA_QUEUE_ENABLED", defaults.queue_enabled),
            feature_gates=_feature_gates(env),
            kuberay_metrics=_flag(env, "RAYQUOTA_KUBERAY_METRICS", defaults.kuberay_metrics),
            webhooks=WebhookSettings.from_env(env),
            web_dashboard=DashboardSettings.from_env(env),
            multikueue=MultiKueueSettings.from_env(env),
        )


def _refuse_unhonoured_settings(env: Mapping[str, str]) -> None:
    """KubeRay's operator settings rayquota cannot honour, by name (kuberay_env)."""
    refused = kuberay_env.refusals(env)
    if "RAYQUOTA_CLUSTER_DOMAIN" in env:
        refused.append("RAYQUOTA_CLUSTER_DOMAIN is now KubeRay's CLUSTER_DOMAIN: set that instead")
    if refused:
        raise ValueError("KubeRay operator settings rayquota does not honour: " + "; ".join(refused))


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={env[name]!r}: expected true or false")


def _feature_gates(env: Mapping[str, str]) -> FeatureGates:
    try:
        return FeatureGates.parse(env.get("RAYQUOTA_FEATURE_GATES", ""))
    except ValueError as exc:
        raise ValueError(f"RAYQUOTA_FEATURE_GATES: {exc}") from exc
