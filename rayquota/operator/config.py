"""The operator's settings, as its components take them: built once at start by
`rayquota.config` from the configuration file and its overrides, and passed in."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING

from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.queue.naming import QueueSettings
from rayquota.operator.ray.vocabulary.labels import DEFAULT_CLUSTER_DOMAIN, KUBERAY_CREATED_BY_VALUE
from rayquota.operator.visibility.settings import VisibilitySettings
from rayquota.operator.webhook_settings import WebhookSettings
from rayquota.queueing.quota.admission_fair_sharing import AdmissionFairSharing
from rayquota.queueing.quota.fairsharing import FairSharing

if TYPE_CHECKING:
    from rayquota.operator.queue.admission.pods_ready import WaitForPodsReady

DEFAULT_RAY_IMAGE = "rayproject/ray:2.41.0"


def _package_version() -> str:
    try:
        return metadata.version("rayquota")
    except metadata.PackageNotFoundError:
        return "0.0.0-dev"


@dataclass(frozen=True)
class QueueConfig:
    """The queue integration's settings."""

    labels: QueueSettings = field(default_factory=QueueSettings)
    api_mode: str = "rayquota"
    """"rayquota" (rayquota.io/v1alpha1) or "kueue" (Kueue's kueue.x-k8s.io/v1beta2)."""
    fair_sharing: bool | FairSharing = False
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's admissionFairSharing: usage-based ordering of LocalQueues (``None``: off)."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    frameworks: tuple[str, ...] | None = None
    """Kueue's ``integrations.frameworks``: the optional kinds (JobSet) are queued only when it
    names them; None (unset): every kind rayquota queues."""


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
    # The MultiKueue check controller (a manager cluster's dispatch to its workers); None: off.
    multikueue: MultiKueueSettings | None = None
    queue: QueueConfig = field(default_factory=QueueConfig)
    # The pending-workloads API (aggregated); None: not served (rayquota run turns it on against
    # the local control plane).
    visibility: VisibilitySettings | None = None
    # The `app.kubernetes.io/created-by` value on the objects the Ray reconcilers create.
    created_by: str = KUBERAY_CREATED_BY_VALUE
    # KubeRay's ENABLE_GCS_FT_REDIS_CLEANUP: False deletes a GCS fault-tolerant cluster without
    # cleaning its Redis first.
    gcs_ft_redis_cleanup: bool = True
    # KubeRay's USE_INGRESS_ON_OPENSHIFT: True makes Ingresses for enableIngress even on OpenShift.
    use_ingress_on_openshift: bool = False
    # Whether the API server is OpenShift's (it serves one of OpenShift's API groups); None: asked
    # once at start-up, as KubeRay does.
    openshift: bool | None = None
    # The zone of a RayCronJob schedule without timeZone (the process's $TZ, as Go reads it);
    # None: /etc/localtime.
    local_time_zone: dt.tzinfo | None = None

    @property
    def openshift_routes(self) -> bool:
        """enableIngress makes an OpenShift Route, not an Ingress (ray/builders/route.py)."""
        return bool(self.openshift) and not self.use_ingress_on_openshift
