"""The Ray half of the operator: the RayCluster, RayJob and RayService controllers on the shared manager."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager
from rayquota.operator.ray.raycluster import RayClusterReconciler
from rayquota.operator.ray.rayjob import RayJobReconciler
from rayquota.operator.ray.rayservice import RayServiceReconciler
from rayquota.operator.ray.resolver import resolver_from_settings


@dataclass(frozen=True)
class RayControllers:
    clusters: RayClusterReconciler
    jobs: RayJobReconciler
    services: RayServiceReconciler


def setup(manager: Manager, config: OperatorConfig) -> RayControllers:
    resolver = resolver_from_settings(
        config.dashboard_resolver, config.dashboard_map_file, config.dashboard_url
    )
    controllers = RayControllers(
        clusters=RayClusterReconciler(manager, config),
        jobs=RayJobReconciler(manager, config, resolver),
        services=RayServiceReconciler(manager, config, resolver),
    )
    manager.on_shutdown(controllers.jobs.close)
    manager.on_shutdown(controllers.services.close)
    return controllers
