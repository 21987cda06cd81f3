"""A reading view of core/v1 pod templates.

The operator reads a few things from pod templates: containers and their resources, node
selectors, tolerations, labels. Those are typed here; every other key is kept untouched as an extra.
In the ``ray.io`` CRDs a pod template carries Kubernetes' full schema, as KubeRay's do
(:data:`KubePodTemplateSpec`); the Workload keeps it free-form but for what the queue reads
(:data:`PodTemplateSpec`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from rayquota.api.common import NON_NEGATIVE_QUANTITY_PATTERN, K8sModel, Quantity
from rayquota.api.k8s_openapi import k8s_type


class ResourceRequirements(K8sModel):
    limits: dict[str, Quantity] = Field(default_factory=dict)
    requests: dict[str, Quantity] = Field(default_factory=dict)


class EnvVar(K8sModel):
    name: str
    value: str | None = None


class ContainerPort(K8sModel):
    container_port: int
    name: str | None = None
    protocol: str | None = None


class Container(K8sModel):
    name: str
    image: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    ports: list[ContainerPort] = Field(default_factory=list)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)


class Toleration(K8sModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class PodSpec(K8sModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None
    priority_class_name: str | None = None
    scheduling_gates: list[dict[str, Any]] = Field(default_factory=list)
    restart_policy: str | None = None


class PodTemplateMeta(K8sModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodTemplateSpecModel(K8sModel):
    metadata: PodTemplateMeta = Field(default_factory=PodTemplateMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


def _free_form(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object kept as given, but for the named properties, which are validated."""
    schema: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        schema["properties"] = properties
    return schema


# The quantities of a pod's resources: what the queue counts and the Ray objects' status sums.
# Checked by the API server when the object is written, so a malformed or negative one is
# refused there, by name, instead of surfacing in the operator when it parses them.
_QUANTITIES = {
    "type": "object",
    "additionalProperties": {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": NON_NEGATIVE_QUANTITY_PATTERN,
        "minimum": 0,
    },
}
_CONTAINERS = {
    "type": "array",
    "items": _free_form(resources=_free_form(requests=_QUANTITIES, limits=_QUANTITIES)),
}

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}

# A pod template as the models see it (typed) and as the CRD declares it: free-form but for what
# the queue reads from it (labels and annotations, where it may run, its containers' resources,
# the pod overhead), so a wrong type there is refused by name when the object is written.
PodTemplateSpec = Annotated[
    PodTemplateSpecModel,
    WithJsonSchema(
        _free_form(
            metadata=_free_form(labels=_STRINGS, annotations=_STRINGS),
            spec=_free_form(
                containers=_CONTAINERS,
                initContainers=_CONTAINERS,
                overhead=_QUANTITIES,
                nodeSelector=_STRINGS,
                tolerations={"type": "array", "items": _free_form()},
            ),
        )
    ),
]


# rayquota's own rule over Kubernetes' schema: the quantities the queue counts are not negative
# (Kubernetes' Quantity allows a sign). A negative request is refused by name when the object is
# written, before the queue would sum it into an admission.
_NON_NEGATIVE = {"additionalProperties": {"pattern": NON_NEGATIVE_QUANTITY_PATTERN, "minimum": 0}}
_COUNTED_RESOURCES = {
    "items": {
        "properties": {"resources": {"properties": {"requests": _NON_NEGATIVE, "limits": _NON_NEGATIVE}}}
    }
}
POD_TEMPLATE_OVERLAY = {
    "properties": {
        "spec": {
            "properties": {
                "containers": _COUNTED_RESOURCES,
                "initContainers": _COUNTED_RESOURCES,
                "overhead": _NON_NEGATIVE,
            }
        }
    }
}

# A pod template with Kubernetes' full schema (as KubeRay's CRDs declare it), typed for reading.
KubePodTemplateSpec = Annotated[
    PodTemplateSpecModel, k8s_type("core.v1.PodTemplateSpec", POD_TEMPLATE_OVERLAY)
]
