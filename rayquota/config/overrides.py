"""Environment variables: each one a documented override of one configuration key.

An override beats the file, a `rayquota run` flag beats the override. A `RAYQUOTA_*` variable that
is no key's override is reported at start with the nearest known name (a typo is never silently
ignored). KubeRay's operator variables are read by `kuberay_env` (honoured or refused by name).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from rayquota.environment import TOOL_VARIABLES


@dataclass(frozen=True)
class Override:
    variable: str
    key: str  # dotted path in the configuration, e.g. "waitForPodsReady.timeout"


_PODS_READY = "waitForPodsReady"
_REQUEUING = "waitForPodsReady.requeuingStrategy"
_LEASE = "leaderElection"
_CERTS = "internalCertManagement"

ENV_OVERRIDES: tuple[Override, ...] = tuple(
    Override(variable, key)
    for variable, key in (
        ("RAYQUOTA_OPERATOR_NAMESPACE", "namespace"),
        ("RAYQUOTA_MANAGE_JOBS_WITHOUT_QUEUE_NAME", "manageJobsWithoutQueueName"),
        ("RAYQUOTA_WAIT_FOR_PODS_READY", f"{_PODS_READY}.enable"),
        ("RAYQUOTA_PODS_READY_TIMEOUT", f"{_PODS_READY}.timeout"),
        ("RAYQUOTA_PODS_READY_RECOVERY_TIMEOUT", f"{_PODS_READY}.recoveryTimeout"),
        ("RAYQUOTA_PODS_READY_BLOCK_ADMISSION", f"{_PODS_READY}.blockAdmission"),
        ("RAYQUOTA_REQUEUING_TIMESTAMP", f"{_REQUEUING}.timestamp"),
        ("RAYQUOTA_REQUEUING_BACKOFF_LIMIT_COUNT", f"{_REQUEUING}.backoffLimitCount"),
        ("RAYQUOTA_REQUEUING_BACKOFF_BASE_SECONDS", f"{_REQUEUING}.backoffBaseSeconds"),
        ("RAYQUOTA_REQUEUING_BACKOFF_MAX_SECONDS", f"{_REQUEUING}.backoffMaxSeconds"),
        ("RAYQUOTA_FAIR_SHARING", "fairSharing.enable"),
        ("RAYQUOTA_DEVICE_CLASS_MAPPINGS", "resources.deviceClassMappings"),
        ("RAYQUOTA_DRA_INTEGRATION", "queue.dra.integration"),
        ("RAYQUOTA_DRA_REJECT_WHEN_DISABLED", "queue.dra.rejectWorkloadsWhenDisabled"),
        ("RAYQUOTA_FAIR_SHARING_PREEMPTION_STRATEGIES", "fairSharing.preemptionStrategies"),
        ("RAYQUOTA_ADMISSION_FAIR_SHARING_HALF_LIFE", "admissionFairSharing.usageHalfLifeTime"),
        ("RAYQUOTA_ADMISSION_FAIR_SHARING_SAMPLING_INTERVAL", "admissionFairSharing.usageSamplingInterval"),
        ("RAYQUOTA_MULTIKUEUE", "multiKueue.enable"),
        ("RAYQUOTA_MULTIKUEUE_GC_INTERVAL", "multiKueue.gcInterval"),
        ("RAYQUOTA_MULTIKUEUE_ORIGIN", "multiKueue.origin"),
        ("RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT", "multiKueue.workerLostTimeout"),
        ("RAYQUOTA_MULTIKUEUE_DISPATCHER", "multiKueue.dispatcherName"),
        ("RAYQUOTA_MULTIKUEUE_NAMESPACE", "multiKueue.namespace"),
        ("RAYQUOTA_MULTIKUEUE_PROBE_INTERVAL", "multiKueue.probeInterval"),
        ("RAYQUOTA_MULTIKUEUE_NOMINATION_TIMEOUT", "multiKueue.nominationTimeout"),
        ("RAYQUOTA_MULTIKUEUE_KUBECONFIG_PATH_PREFIX", "multiKueue.kubeconfigPathPrefix"),
        ("RAYQUOTA_MULTIKUEUE_INCREMENTAL_STEP", "multiKueue.incrementalDispatcherConfig.stepSize"),
        ("RAYQUOTA_MULTIKUEUE_INCREMENTAL_ROUND", "multiKueue.incrementalRoundTimeout"),
        ("RAYQUOTA_LEASE_NAME", f"{_LEASE}.resourceName"),
        ("RAYQUOTA_LEASE_NAMESPACE", f"{_LEASE}.resourceNamespace"),
        ("RAYQUOTA_LEASE_DURATION", f"{_LEASE}.leaseDuration"),
        ("RAYQUOTA_LEASE_RENEW_DEADLINE", f"{_LEASE}.renewDeadline"),
        ("RAYQUOTA_LEASE_RENEW_PERIOD", f"{_LEASE}.renewPeriod"),
        ("RAYQUOTA_LEASE_RETRY_PERIOD", f"{_LEASE}.retryPeriod"),
        ("RAYQUOTA_WEBHOOK_LISTEN_PORT", "webhook.port"),
        ("RAYQUOTA_WEBHOOK_CERT_DIR", "webhook.certDir"),
        ("RAYQUOTA_WEBHOOK_PORT", "webhook.loopbackPort"),
        ("RAYQUOTA_WEBHOOK_CERT_SECRET", f"{_CERTS}.webhookSecretName"),
        ("RAYQUOTA_WEBHOOK_HOSTS", f"{_CERTS}.hosts"),
        ("RAYQUOTA_WEBHOOK_CONFIGURATIONS", f"{_CERTS}.configurations"),
        ("RAYQUOTA_VISIBILITY", "visibility.enable"),
        ("RAYQUOTA_VISIBILITY_PORT", "visibility.port"),
        ("RAYQUOTA_VISIBILITY_LOOPBACK_PORT", "visibility.loopbackPort"),
        ("RAYQUOTA_VISIBILITY_CERT_DIR", "visibility.certDir"),
        ("RAYQUOTA_BIND_ADDRESS", "bindAddress"),
        ("RAYQUOTA_LOG_FORMAT", "logFormat"),
        ("RAYQUOTA_OPERATOR_VERSION", "operatorVersion"),
        ("RAYQUOTA_WORKERS", "controller.workers"),
        ("RAYQUOTA_RESYNC_INTERVAL", "controller.resyncInterval"),
        ("RAYQUOTA_QUEUE_ENABLED", "queue.enable"),
        ("RAYQUOTA_QUEUE_API", "queue.api"),
        ("RAYQUOTA_QUEUE_LABELS", "queue.queueLabelKeys"),
        ("RAYQUOTA_PRIORITY_LABELS", "queue.priorityLabelKeys"),
        ("RAYQUOTA_RECONCILERS_ENABLED", "kuberay.reconcilersEnabled"),
        ("RAYQUOTA_FEATURE_GATES", "kuberay.featureGates"),
        ("RAYQUOTA_KUBERAY_METRICS", "kuberay.metrics"),
        ("CLUSTER_DOMAIN", "kuberay.clusterDomain"),
        ("RAYQUOTA_CREATED_BY_LABEL", "kuberay.createdByLabel"),
        ("ENABLE_GCS_FT_REDIS_CLEANUP", "kuberay.gcsFtRedisCleanup"),
        ("USE_INGRESS_ON_OPENSHIFT", "kuberay.useIngressOnOpenShift"),
        ("RAYQUOTA_SUBMITTER_IMAGE", "kuberay.submitterImage"),
        ("RAYQUOTA_RAYJOB_STOP_TIMEOUT", "kuberay.rayJobStopTimeout"),
        ("RAYQUOTA_DASHBOARD_RESOLVER", "rayDashboard.resolver"),
        ("RAYQUOTA_DASHBOARD_URL", "rayDashboard.url"),
        ("RAYQUOTA_DASHBOARD_MAP_FILE", "rayDashboard.mapFile"),
        ("RAYQUOTA_DASHBOARD_TIMEOUT", "rayDashboard.timeout"),
        ("RAYQUOTA_DASHBOARD_PORT", "dashboard.port"),
        ("RAYQUOTA_DASHBOARD_BIND_ADDRESS", "dashboard.bindAddress"),
        ("RAYQUOTA_DASHBOARD_ALLOWED_ORIGINS", "dashboard.allowedOrigins"),
        ("RAYQUOTA_DASHBOARD_PROMETHEUS_URL", "dashboard.prometheusUrl"),
    )
)

# RAYQUOTA_* variables other parts of rayquota read (the local control plane, the test suite):
# not the operator's settings, but not typos either.
OTHER_KNOWN = (
    *TOOL_VARIABLES,
    "RAYQUOTA_FAULTS_KEEP_LOGS",
    "RAYQUOTA_FUZZ_EXAMPLES",
    "RAYQUOTA_SCREENSHOTS_DIR",
)
OTHER_KNOWN_PREFIXES = ("RAYQUOTA_TEST_",)
RETIRED = {
    "RAYQUOTA_CLUSTER_DOMAIN": "RAYQUOTA_CLUSTER_DOMAIN is now KubeRay's CLUSTER_DOMAIN: set that instead"
}

# Sections an override's key may create; created by overrides of their sub-keys alone (without
# the switch) they stay off, as the variables always behaved.
SWITCHED_SECTIONS = {
    "waitForPodsReady": "RAYQUOTA_WAIT_FOR_PODS_READY",
    "fairSharing": "RAYQUOTA_FAIR_SHARING",
    "multiKueue": "RAYQUOTA_MULTIKUEUE",
}

BY_VARIABLE = {o.variable: o for o in ENV_OVERRIDES}
BY_KEY = {o.key: o for o in ENV_OVERRIDES}


def set_variables(env: Mapping[str, str]) -> list[Override]:
    """The overrides set (non-empty) in ``env``, in table order. An empty variable is unset, as the
    operator always read them."""
    return [o for o in ENV_OVERRIDES if env.get(o.variable, "").strip()]


def misspelt(env: Mapping[str, str]) -> list[str]:
    """A warning for each `RAYQUOTA_*` variable in ``env`` that is no known name."""
    known = [*BY_VARIABLE, *OTHER_KNOWN]
    warnings = []
    for name in sorted(env):
        if not name.startswith("RAYQUOTA_") or name in known or name in RETIRED:
            continue
        if name.startswith(OTHER_KNOWN_PREFIXES):
            continue
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.0)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        warnings.append(f"environment variable {name} is not a rayquota setting and is ignored{hint}")
    return warnings
