"""Checks of a RayService spec that the CRD schema cannot express; a failing one blocks the
service (Ready=False, ValidationFailed) with a Warning event, and nothing is created or changed."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rayquota.api.ray_v1 import ClusterUpgradeOptions, RayServiceUpgradeType
from rayquota.operator.ray.raycluster.feature_validation import feature_errors
from rayquota.operator.ray.raycronjob.schedule import ScheduleError, go_duration_seconds
from rayquota.operator.ray.rayservice.plan import upgrade_type
from rayquota.operator.ray.rayservice.serve_client import InvalidServeConfig, serve_config


def upgrade_options(service: Mapping[str, Any]) -> ClusterUpgradeOptions:
    """clusterUpgradeOptions, parsed (with maxSurgePercent's default); validated beforehand."""
    raw = (service["spec"].get("upgradeStrategy") or {}).get("clusterUpgradeOptions") or {}
    return ClusterUpgradeOptions.model_validate(raw)


INITIALIZING_TIMEOUT = "ray.io/initializing-timeout"


def initializing_timeout_errors(annotations: Mapping[str, str]) -> list[str]:
    """KubeRay v1.7.0's annotation (fail the service for good when it is not ready in time) is
    not implemented: refused, never ignored. A value KubeRay would refuse gets KubeRay's reason."""
    value = annotations.get(INITIALIZING_TIMEOUT)
    if not value:
        return []
    where = f"metadata.annotations[{INITIALIZING_TIMEOUT}]"
    try:
        seconds = float(int(value)) if value.lstrip("+-").isdigit() else go_duration_seconds(value)
    except ScheduleError:
        return [f"{where} {value!r} is neither a Go duration (e.g. '5m') nor a whole number of seconds"]
    if seconds <= 0:
        return [f"{where} {value!r} must be positive"]
    return [
        f"{where} is not implemented by rayquota: a RayService that is not ready in time would not be "
        "failed and cleaned up as KubeRay does; remove the annotation"
    ]


def validate_rayservice(service: Mapping[str, Any], allowed: Collection[str] = ()) -> list[str]:
    """``allowed``: gated RayCluster fields whose feature gate is on."""
    problems: list[str] = []
    spec = service.get("spec") or {}
    try:
        serve_config(spec.get("serveConfigV2"))
    except InvalidServeConfig as exc:
        problems.append(str(exc))
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    problems += initializing_timeout_errors(annotations)
    problems += feature_errors(
        spec.get("rayClusterConfig") or {},
        annotations,
        "spec.rayClusterConfig",
        owner_kind="RayService",
        allowed=allowed,
    )
    config = spec.get("rayClusterConfig") or {}
    head_service = (config.get("headGroupSpec") or {}).get("headService") or {}
    if (head_service.get("metadata") or {}).get("name"):
        # KubeRay's rule: each of the service's clusters names its own head Service.
        problems.append("spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set")
    try:
        strategy = upgrade_type(service)
    except ValueError:
        return [*problems, f"unknown upgradeStrategy.type {spec['upgradeStrategy'].get('type')!r}"]
    if strategy == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE:
        if not config.get("enableInTreeAutoscaling"):
            # KubeRay's rule and words: the new cluster grows step by step through the autoscaler.
            problems.append(
                "Ray Autoscaler is required for NewClusterWithIncrementalUpgrade: "
                "set spec.rayClusterConfig.enableInTreeAutoscaling: true"
            )
        raw = (spec.get("upgradeStrategy") or {}).get("clusterUpgradeOptions")
        if not raw:
            problems.append("NewClusterWithIncrementalUpgrade needs upgradeStrategy.clusterUpgradeOptions")
        else:
            try:
                options = upgrade_options(service)
            except ValueError as exc:
                problems.append(f"clusterUpgradeOptions: {exc}")
            else:
                if options.step_size_percent < 1 or options.max_surge_percent < 1:
                    problems.append(
                        "stepSizePercent and maxSurgePercent must be at least 1 (or nothing moves)"
                    )
                elif options.step_size_percent > options.max_surge_percent:
                    problems.append("stepSizePercent must be less than or equal to maxSurgePercent")
    return problems
