"""The Ray half of the operator: the RayCluster, RayJob, RayService and RayCronJob controllers on
the shared manager, and KubeRay's control-plane metrics about their objects."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.core import Manager, resources
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.builders.networkpolicy import GATE as NETWORK_POLICY_GATE
from rayquota.operator.ray.builders.networkpolicy import NetworkPolicyReconciler
from rayquota.operator.ray.dashboard_api.resolver import resolver_from_settings
from rayquota.operator.ray.kuberay_metrics import KubeRayMetrics
from rayquota.operator.ray.raycluster.reconciler import RayClusterReconciler
from rayquota.operator.ray.raycronjob.clock import Clock, SystemClock
from rayquota.operator.ray.raycronjob.reconciler import RayCronJobReconciler
from rayquota.operator.ray.rayjob.reconciler import RayJobReconciler
from rayquota.operator.ray.rayservice.reconciler import RayServiceReconciler
from rayquota.operator.ray.settings import RaySettings


@dataclass(frozen=True)
class RayControllers:
    clusters: RayClusterReconciler
    jobs: RayJobReconciler
    services: RayServiceReconciler
    cronjobs: RayCronJobReconciler | None = None
    """None when KubeRay's RayCronJob feature gate is set to false."""
    kuberay_metrics: KubeRayMetrics | None = None
    """The kuberay_* families; served only where the operator serves metrics."""
    network_policies: NetworkPolicyReconciler | None = None
    """None unless KubeRay's RayClusterNetworkPolicy feature gate is on."""


def setup(
    manager: Manager,
    config: RaySettings,
    *,
    clock: Clock | None = None,
    inherited_label_keys: tuple[str, ...] = (),
) -> RayControllers:
    """`clock`: what the RayCronJob schedules are read against (the system's by default);
    `inherited_label_keys`: the labels a RayCronJob passes on to its RayJobs (the queue's)."""
    resolver = resolver_from_settings(
        config.dashboard_resolver, config.dashboard_map_file, config.dashboard_url, config.cluster_domain
    )
    cronjobs = None
    if config.feature_gates.enabled("RayCronJob"):
        cronjobs = RayCronJobReconciler(
            manager,
            clock=clock or SystemClock(),
            inherited_label_keys=inherited_label_keys,
            local_zone=config.local_time_zone,
        )
    metrics = None
    if config.kuberay_metrics:
        metrics = KubeRayMetrics()
        metrics.watch(
            manager.informer(resources.RAYCLUSTERS),
            manager.informer(resources.RAYJOBS),
            manager.informer(resources.RAYSERVICES),
        )
    # One token reader: the RayCluster controller makes the Secrets, the others read them.
    tokens = AuthTokens(manager)
    controllers = RayControllers(
        clusters=RayClusterReconciler(manager, config, tokens),
        jobs=RayJobReconciler(manager, config, resolver, tokens),
        services=RayServiceReconciler(manager, config, resolver, tokens),
        cronjobs=cronjobs,
        kuberay_metrics=metrics,
        network_policies=(
            NetworkPolicyReconciler(manager) if config.feature_gates.enabled(NETWORK_POLICY_GATE) else None
        ),
    )
    manager.on_shutdown(controllers.jobs.close)
    manager.on_shutdown(controllers.services.close)
    return controllers
