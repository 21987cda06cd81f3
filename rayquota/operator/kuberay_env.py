"""KubeRay v1.7.0's operator environment settings, as rayquota reads them.

A KubeRay user's operator environment (the Helm chart's `env`, a Deployment patched by hand)
must not be ignored silently. Each variable KubeRay's operator reads is either honoured or, when
it asks for a behaviour rayquota does not have, refused at start-up with its name, its value
and what rayquota does instead. A value that asks for what rayquota does anyway (KubeRay's
default, mostly) is accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

CLUSTER_DOMAIN = "CLUSTER_DOMAIN"
# Honoured: the overrides of the configuration's kuberay.clusterDomain, kuberay.gcsFtRedisCleanup
# and kuberay.useIngressOnOpenShift (rayquota.config.overrides).
HONOURED = (CLUSTER_DOMAIN, "ENABLE_GCS_FT_REDIS_CLEANUP", "USE_INGRESS_ON_OPENSHIFT")


def _is_true(value: str) -> bool:
    return value.strip().lower() == "true"


def _is_false(value: str) -> bool:
    return value.strip().lower() == "false"


def _not_300(value: str) -> bool:
    """KubeRay falls back to its default (300) for a value that is not a positive integer."""
    try:
        seconds = int(value.strip())
    except ValueError:
        return False
    return seconds > 0 and seconds != 300


@dataclass(frozen=True)
class KubeRayEnvSetting:
    refused_when: Callable[[str], bool]  # the values that ask for a behaviour rayquota lacks
    instead: str  # what rayquota does


KUBERAY_ENV: Mapping[str, KubeRayEnvSetting] = {
    "ENABLE_INIT_CONTAINER_INJECTION": KubeRayEnvSetting(
        _is_false, "rayquota always gives worker pods the wait-gcs-ready init container"
    ),
    "ENABLE_PROBES_INJECTION": KubeRayEnvSetting(
        _is_false, "rayquota always adds KubeRay's default readiness and liveness probes"
    ),
    "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": KubeRayEnvSetting(
        _is_true, "rayquota's head Service is headless unless headGroupSpec.headService says otherwise"
    ),
    "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV": KubeRayEnvSetting(
        lambda value: bool(value.strip()),
        "rayquota reconciles on watch events and looks at every object again every "
        "controller.resyncInterval (RAYQUOTA_RESYNC_INTERVAL)",
    ),
    "ENABLE_RANDOM_POD_DELETE": KubeRayEnvSetting(
        _is_true, "rayquota removes the surplus worker pods it chooses (pending and newest first)"
    ),
    "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": KubeRayEnvSetting(
        _not_300, "rayquota fails a RayJob whose status cannot be read for 300 s (KubeRay's default)"
    ),
    "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS": KubeRayEnvSetting(
        _not_300, "rayquota waits 300 s (KubeRay's default) before finishing a RayJob whose Ray job ended"
    ),
    "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": KubeRayEnvSetting(
        _is_true, "rayquota deletes a RayJob only as its spec.deletionStrategy says"
    ),
    "ENABLE_ZERO_DOWNTIME": KubeRayEnvSetting(
        _is_false, "rayquota always upgrades a RayService by a new cluster when its cluster spec changes"
    ),
    "ENABLE_LOGIN_SHELL": KubeRayEnvSetting(_is_true, "rayquota starts Ray with `/bin/bash -c`"),
    "ENABLE_DETERMINISTIC_HEAD_POD_NAME": KubeRayEnvSetting(
        _is_true, "rayquota names head pods `<cluster>-head-<random>`"
    ),
    "ENABLE_WEBHOOKS": KubeRayEnvSetting(
        _is_true,
        "KubeRay's own RayCluster webhook does not exist in rayquota; its reconcilers validate every "
        "object and its admission webhooks are configured by the configuration's webhook keys",
    ),
}


def refusals(env: Mapping[str, str]) -> list[str]:
    """One message per KubeRay setting in ``env`` whose value rayquota cannot honour."""
    return [
        f"{name}={env[name]!r}: {setting.instead}"
        for name, setting in KUBERAY_ENV.items()
        if name in env and setting.refused_when(env[name])
    ]

