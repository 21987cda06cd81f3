"""What the Ray reconcilers are set up with: KubeRay's operator settings, as the configuration
gives them. `rayquota.operator.config.OperatorConfig` adds the queue's, the servers' and the
runtime's settings to these; the Ray side reads only these."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from importlib import metadata

from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.ray.vocabulary.labels import DEFAULT_CLUSTER_DOMAIN, KUBERAY_CREATED_BY_VALUE

DEFAULT_RAY_IMAGE = "rayproject/ray:2.41.0"


def _package_version() -> str:
    try:
        return metadata.version("rayquota")
    except metadata.PackageNotFoundError:
        return "0.0.0-dev"


@dataclass(frozen=True)
class RaySettings:
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
    dashboard_timeout_s: float = 5.0
    # How long a deleted RayJob waits for its Ray job to stop before it is released anyway.
    rayjob_stop_timeout_s: float = 300.0
    # KubeRay's operator feature gates (`--feature-gates` syntax); see feature_gates.py.
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    # KubeRay's control-plane metrics (kuberay_*) beside ours; KubeRay's chart `metrics.enabled`.
    kuberay_metrics: bool = True
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
        """enableIngress makes an OpenShift Route, not an Ingress (builders/route.py)."""
        return bool(self.openshift) and not self.use_ingress_on_openshift
