"""The operator's configuration file, as typed models (pydantic v2).

Field names are Kueue's (`config.kueue.x-k8s.io/v1beta2` `Configuration`) wherever Kueue has the
setting, with Kueue's meaning; the settings Kueue does not have are rayquota's own keys, mostly in
the sections `kuberay`, `rayDashboard`, `queue` and `dashboard`. Every key is camelCase as in
Kueue; an unknown key anywhere is refused (`extra="forbid"`).

Durations are Go durations as Kueue writes them ("5m", "1h30m", "300s") or a number of seconds.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from rayquota.config.kueue_sections import (
    ClusterProfile,
    CustomLabel,
    ExternalFramework,
    LabelSelector,
    ObjectRetentionPolicies,
    ResourceTransformation,
    TlsOptions,
    VisibilityServer,
)
from rayquota.config.section import Port, Section
from rayquota.operator.ray.raycronjob.schedule import ScheduleError, go_duration_seconds

RAYQUOTA_API_VERSION = "config.rayquota.io/v1alpha1"
KUEUE_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
KIND = "Configuration"


def _seconds(raw: Any) -> Any:
    """A Go duration string ("90s", "5m") or a number of seconds; anything else is left to the
    float validation, which names the key."""
    if isinstance(raw, str):
        text = raw.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return go_duration_seconds(text)
        except ScheduleError:
            raise ValueError(f"expected a duration such as 90s, 5m or 1h30m, got {raw!r}") from None
    return raw


def _comma_list(raw: Any) -> Any:
    """A list, or (from an environment variable) a comma-separated string."""
    if isinstance(raw, str):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw


Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0)]
StringList = Annotated[list[str], BeforeValidator(_comma_list)]


class RequeuingStrategy(Section):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoffLimitCount: Annotated[int, Field(ge=0)] | None = None
    backoffBaseSeconds: Seconds = 60.0
    backoffMaxSeconds: Seconds = 3600.0


class WaitForPodsReady(Section):
    """Kueue's waitForPodsReady: present means on (v1beta2); `enable` is v1beta1's switch, kept so
    an override can turn the section off."""

    enable: bool = True
    timeout: PositiveSeconds = 300.0
    blockAdmission: bool = False
    recoveryTimeout: Seconds | None = None
    requeuingStrategy: RequeuingStrategy = RequeuingStrategy()


class FairSharing(Section):
    """Kueue's fairSharing: present means on (v1beta2); `enable` as in v1beta1."""

    enable: bool = True
    preemptionStrategies: Annotated[
        list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]], BeforeValidator(_comma_list)
    ] = [
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    ]


class AdmissionFairSharing(Section):
    """Kueue's admissionFairSharing: present means on; it orders the LocalQueues of a ClusterQueue
    with `admissionScope.admissionMode: UsageBasedAdmissionFairSharing` by their decayed usage."""

    usageHalfLifeTime: Seconds = 0.0
    usageSamplingInterval: PositiveSeconds = 300.0
    resourceWeights: dict[str, Annotated[float, Field(ge=0)]] = {}


class Dispatcher(StrEnum):
    ALL_AT_ONCE = "AllAtOnce"
    MOST_FREE_QUOTA = "MostFreeQuota"
    INCREMENTAL = "Incremental"


# Kueue's dispatcherName values, read as ours.
KUEUE_DISPATCHERS = {
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once": Dispatcher.ALL_AT_ONCE,
    "kueue.x-k8s.io/multikueue-dispatcher-incremental": Dispatcher.INCREMENTAL,
}


class IncrementalDispatcherConfig(Section):
    """Kueue's multiKueue.incrementalDispatcherConfig: how many workers each round adds."""

    stepSize: Annotated[int, Field(ge=1)] = 3


class MultiKueue(Section):
    """Kueue's multiKueue (gcInterval, origin, workerLostTimeout, dispatcherName) and rayquota's
    own keys. The controller runs where `enable` is true (a manager cluster)."""

    enable: bool = False
    gcInterval: PositiveSeconds = 60.0
    origin: str = "multikueue"
    workerLostTimeout: PositiveSeconds = 300.0
    dispatcherName: Dispatcher = Dispatcher.ALL_AT_ONCE
    namespace: str | None = None
    """Where the workers' kubeconfig Secrets are; default: the configuration's `namespace`."""
    probeInterval: PositiveSeconds = 2.0
    nominationTimeout: PositiveSeconds = 60.0
    kubeconfigPathPrefix: str = "/etc/multikueue/kubeconfigs"
    # Kueue's keys rayquota refuses by name (kueue_keys.py says why).
    externalFrameworks: list[ExternalFramework] | None = None
    clusterProfile: ClusterProfile | None = None
    incrementalDispatcherConfig: IncrementalDispatcherConfig = IncrementalDispatcherConfig()
    incrementalRoundTimeout: PositiveSeconds = 300.0
    """rayquota's: how long an Incremental round lasts (fixed at 5 minutes in Kueue)."""

    @field_validator("dispatcherName", mode="before")
    @classmethod
    def _kueue_name(cls, raw: Any) -> Any:
        known = KUEUE_DISPATCHERS.get(raw) if isinstance(raw, str) else None
        return known.value if known is not None else raw


class LeaderElection(Section):
    """component-base's LeaderElectionConfiguration (Kueue's `leaderElection`), plus `renewPeriod`
    (how often the holder renews). A duration without the periods scales them."""

    leaderElect: bool = True
    resourceName: str = "rayquota-operator"
    resourceNamespace: str | None = None
    leaseDuration: PositiveSeconds | None = None
    renewDeadline: PositiveSeconds | None = None
    renewPeriod: PositiveSeconds | None = None
    retryPeriod: PositiveSeconds | None = None
    resourceLock: Literal["leases"] = "leases"


class Webhook(Section):
    """Kueue's `webhook`: the port the chart's webhook server listens on and cert-manager's
    certificate folder; `loopbackPort` (rayquota's) serves webhooks with a throw-away CA on
    127.0.0.1 for an API server on the same host."""

    port: Port | None = None
    host: str | None = None
    certDir: str | None = None
    loopbackPort: Port | None = None


class InternalCertManagement(Section):
    """Kueue's internalCertManagement: the leader keeps the webhook certificate in a Secret."""

    enable: bool = True
    webhookServiceName: str | None = None
    webhookSecretName: str | None = None
    hosts: StringList = []
    """rayquota's: the DNS names the serving certificate covers (Kueue derives them)."""
    configurations: StringList = []
    """rayquota's: the webhook configurations whose caBundle the leader keeps current."""


class LocalQueueMetrics(Section):
    """Kueue's metrics.localQueueMetrics; rayquota serves every LocalQueue's metrics (kueue_keys)."""

    enable: bool = False
    localQueueSelector: LabelSelector | None = None


class Metrics(Section):
    """Kueue's `metrics.bindAddress` (":8080"; "0" turns serving off)."""

    bindAddress: str = ":8080"
    enableClusterQueueResources: bool = False
    customLabels: list[CustomLabel] | None = None
    localQueueMetrics: LocalQueueMetrics | None = None


class Health(Section):
    healthProbeBindAddress: str = ":8081"
    readinessEndpointName: Literal["readyz"] = "readyz"
    livenessEndpointName: Literal["healthz"] = "healthz"


class Controller(Section):
    """Kueue's `controller`; `workers` and `resyncInterval` are rayquota's."""

    workers: Annotated[int, Field(ge=1)] = 8
    resyncInterval: PositiveSeconds = 600.0
    groupKindConcurrency: dict[str, int] | None = None
    cacheSyncTimeout: Seconds | None = None


class ClientConnection(Section):
    qps: float | None = None
    burst: int | None = None


class Integrations(Section):
    frameworks: list[str] | None = None
    externalFrameworks: list[str] | None = None
    labelKeysToCopy: list[str] | None = None


class Dra(Section):
    """rayquota's names for Kueue's two DRA feature gates."""

    integration: bool = True  # Kueue's KueueDRAIntegration
    rejectWorkloadsWhenDisabled: bool = True  # Kueue's KueueDRARejectWorkloadsWhenDRADisabled


def _json_list(raw: Any) -> Any:
    """A list, or (from an environment variable) its JSON text."""
    if isinstance(raw, str):
        return json.loads(raw) if raw.strip() else []
    return raw


class Resources(Section):
    """Kueue's resources: only deviceClassMappings is honoured (kueue_keys refuses the rest)."""

    quotaCheckStrategy: Literal["BlockUndeclared", "IgnoreUndeclared"] | None = None
    excludeResourcePrefixes: list[str] | None = None
    transformations: list[ResourceTransformation] | None = None
    deviceClassMappings: Annotated[list[dict[str, Any]], BeforeValidator(_json_list)] = []


class Queue(Section):
    """rayquota's: the queue integration and the quota API it acts on."""

    enable: bool = True
    api: Literal["rayquota", "kueue"] = "rayquota"
    queueLabelKeys: StringList = ["rayquota.io/queue-name", "kueue.x-k8s.io/queue-name"]
    priorityLabelKeys: StringList = ["rayquota.io/priority-class", "kueue.x-k8s.io/priority-class"]
    dra: Dra = Dra()


class KubeRay(Section):
    """rayquota's: the Ray reconcilers, with KubeRay's operator settings where KubeRay has them."""

    reconcilersEnabled: bool = True
    featureGates: str = ""
    """KubeRay's `--feature-gates` syntax: `Name=true,Other=false`."""
    metrics: bool = True
    clusterDomain: str = "cluster.local"
    createdByLabel: str = "kuberay-operator"
    gcsFtRedisCleanup: bool = True
    useIngressOnOpenShift: bool = False
    """KubeRay's USE_INGRESS_ON_OPENSHIFT: Ingresses, not Routes, for enableIngress on OpenShift."""
    submitterImage: str = "rayproject/ray:2.41.0"
    rayJobStopTimeout: PositiveSeconds = 300.0


class RayDashboard(Section):
    """rayquota's: how the operator reaches each cluster's Ray dashboard."""

    resolver: Literal["service", "local"] = "service"
    url: str | None = None
    mapFile: str | None = None
    timeout: PositiveSeconds = 5.0


class WebDashboard(Section):
    """rayquota's read-only web dashboard in the operator process; off without `port`."""

    port: Port | None = None
    bindAddress: str = "127.0.0.1"
    allowedOrigins: StringList = []
    prometheusUrl: str | None = None


class Visibility(Section):
    """The pending-workloads API (Kueue's visibility API) as an aggregated API. `loopbackPort`:
    served on 127.0.0.1 and registered by the operator for an API server on the same host (the
    default against the local control plane, on a free port); `port`: the chart's, named by its
    APIServices and Service, with cert-manager's certificate from `certDir` or a throw-away one.
    `enable: false` turns it off."""

    enable: bool | None = None
    port: Port | None = None
    host: str | None = None
    certDir: str | None = None
    loopbackPort: Port | None = None


class Configuration(Section):
    apiVersion: Literal["config.rayquota.io/v1alpha1", "config.kueue.x-k8s.io/v1beta2"] = (
        "config.rayquota.io/v1alpha1"
    )
    kind: Literal["Configuration"] = "Configuration"
    namespace: str | None = None
    manageJobsWithoutQueueName: bool = False
    managedJobsNamespaceSelector: LabelSelector | None = None
    waitForPodsReady: WaitForPodsReady | None = None
    fairSharing: FairSharing | None = None
    admissionFairSharing: AdmissionFairSharing | None = None
    multiKueue: MultiKueue | None = None
    leaderElection: LeaderElection = LeaderElection()
    webhook: Webhook = Webhook()
    internalCertManagement: InternalCertManagement | None = None
    metrics: Metrics = Metrics()
    health: Health = Health()
    controller: Controller = Controller()
    clientConnection: ClientConnection | None = None
    integrations: Integrations | None = None
    featureGates: dict[str, bool] | None = None
    pprofBindAddress: str | None = None
    resources: Resources | None = None
    # Kueue keys rayquota refuses by name or ignores (kueue_keys.py says why).
    objectRetentionPolicies: ObjectRetentionPolicies | None = None
    visibilityServer: VisibilityServer | None = None
    tls: TlsOptions | None = None
    # rayquota's own.
    operatorVersion: str | None = None
    bindAddress: str = "127.0.0.1"
    logFormat: Literal["text", "json"] = "text"
    queue: Queue = Queue()
    kuberay: KubeRay = KubeRay()
    rayDashboard: RayDashboard = RayDashboard()
    dashboard: WebDashboard = WebDashboard()
    visibility: Visibility = Visibility()
