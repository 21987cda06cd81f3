"""``rayquota.io/v1alpha1`` AdmissionCheck and the admission-check fields of ClusterQueue and
Workload, shaped like Kueue's (v1beta2) so a platform team's manifests translate by changing the
apiVersion. The engine's semantics are in :mod:`rayquota.queueing.admission_checks`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    K8sModel,
    KubeObject,
    ObjectName,
    PrinterColumn,
)
from rayquota.api.pod import Toleration
from rayquota.queueing.admission_checks import CheckState

GROUP = "rayquota.io"
VERSION = "v1alpha1"

MAX_ADMISSION_CHECKS = 64
MAX_CHECK_MESSAGE = 32768
MANUAL_CONTROLLER = "rayquota.io/manual"
"""The built-in check controller: a person or a test sets each workload's state."""


class AdmissionCheckParametersReference(K8sModel):
    """The object holding the controller's settings for this check (the controller reads it)."""

    api_group: Annotated[str, Field(max_length=253)] | None = None
    kind: Annotated[str, Field(max_length=63)] | None = None
    name: ObjectName | None = None


class AdmissionCheckSpec(K8sModel):
    controller_name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=253,
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "controllerName is immutable"}
                ]
            },
        ),
    ]
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(K8sModel):
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )


class AdmissionCheck(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="AdmissionCheck",
        plural="admissionchecks",
        scope="Cluster",
        short_names=("ac",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Controller", "string", ".spec.controllerName"),
            PrinterColumn("Active", "string", '.status.conditions[?(@.type=="Active")].status'),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: AdmissionCheckSpec
    status: AdmissionCheckStatus | None = None


# --- ClusterQueue.spec.admissionChecksStrategy ------------------------------------------------


class AdmissionCheckStrategyRule(K8sModel):
    """A check and the flavors it applies to (every flavor when ``onFlavors`` is empty)."""

    name: ObjectName
    on_flavors: Annotated[list[ObjectName], Field(max_length=16)] = Field(default_factory=list)


class AdmissionChecksStrategy(K8sModel):
    admission_checks: Annotated[list[AdmissionCheckStrategyRule], Field(max_length=MAX_ADMISSION_CHECKS)] = (
        Field(default_factory=list)
    )


# --- Workload.status.admissionChecks ----------------------------------------------------------


class PodSetUpdate(K8sModel):
    """What a check asks to add to a pod set's pods when they start (recorded; applied later)."""

    name: ObjectName
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: Annotated[list[Toleration], Field(max_length=8)] = Field(default_factory=list)


class AdmissionCheckState(K8sModel):
    name: ObjectName
    state: CheckState
    last_transition_time: datetime
    message: Annotated[str, Field(max_length=MAX_CHECK_MESSAGE)] = ""
    pod_set_updates: Annotated[list[PodSetUpdate], Field(max_length=8)] = Field(default_factory=list)
    requeue_after_seconds: Annotated[int, Field(ge=0)] | None = None
    retry_count: Annotated[int, Field(ge=0)] | None = None
