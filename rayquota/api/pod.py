"""A reading view of core/v1 pod templates.

The CRD schemas keep pod templates free-form (the API server validates real pods when they are
created), but the operator reads a few things from them: containers and their resources, node
selectors, tolerations, labels. Those are typed here; every other key is kept untouched as an extra.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from rayquota.api.common import K8sModel, Quantity


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


_FREE_FORM_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

# A pod template as the models see it (typed) and as the CRD declares it (free-form).
PodTemplateSpec = Annotated[PodTemplateSpecModel, WithJsonSchema(_FREE_FORM_OBJECT)]
