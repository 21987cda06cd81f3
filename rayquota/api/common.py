"""Shared building blocks of the API models: the base model, object metadata, quantities, conditions.

Every model here reads and writes the JSON shape the Kubernetes API server stores (camelCase keys).
Python attributes are snake_case; aliases carry the wire names.

Unknown fields are *kept* (``extra="allow"``): a body written against a newer KubeRay or Kueue, or a
field we do not model yet, survives ``from_body`` -> ``to_body`` unchanged. The operator copies specs
around (a RayJob's ``rayClusterSpec`` becomes a RayCluster's ``spec``) and patches objects it does not
fully understand, so dropping unknown keys would silently lose users' settings. The CRD schemas are
still structural and the API server prunes what they do not declare; the models just never add loss.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

INT32_MAX = 2**31 - 1

# The canonical Kubernetes resource.Quantity grammar (sign, number, optional suffix or exponent).
_QUANTITY_BODY = (
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
QUANTITY_PATTERN = r"^(\+|-)?" + _QUANTITY_BODY + "$"
# Quotas may not be negative: the same grammar without a leading '-'.
NON_NEGATIVE_QUANTITY_PATTERN = r"^\+?" + _QUANTITY_BODY + "$"

_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_NON_NEGATIVE_QUANTITY_RE = re.compile(NON_NEGATIVE_QUANTITY_PATTERN)


def _check_quantity(value: str | int) -> str | int:
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return value


def _check_non_negative_quantity(value: str | int) -> str | int:
    if isinstance(value, int) and value < 0:
        raise ValueError(f"{value!r} is negative")
    if isinstance(value, str) and not _NON_NEGATIVE_QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a non-negative Kubernetes quantity")
    return value


# A Kubernetes quantity ("8", 8, "500m", "64Gi"). Parsing to numbers is the engine's job
# (rayquota.queueing.quantity); the API layer only checks the grammar.
Quantity = Annotated[
    str | int,
    AfterValidator(_check_quantity),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
        }
    ),
]

NonNegativeQuantity = Annotated[
    str | int,
    AfterValidator(_check_non_negative_quantity),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": NON_NEGATIVE_QUANTITY_PATTERN,
            "minimum": 0,
        }
    ),
]

# Objects whose inner shape is owned by Kubernetes itself (Service, SecurityContext, affinity, ...):
# stored as given, never pruned.
FreeForm = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
FreeFormList = Annotated[
    list[dict[str, Any]],
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
    ),
]

Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
NonNegativeInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
# Names of Kubernetes objects referenced by name (DNS-1123 subdomain).
ObjectName = Annotated[str, Field(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]

# Marks the list of conditions the way Kubernetes expects: a map keyed by condition type, so
# server-side apply merges them per type.
CONDITIONS_LIST = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


class K8sModel(BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python, unknown keys kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        use_enum_values=False,
        validate_default=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, only what was set (so defaults are not invented)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(K8sModel):
    """A metav1.Condition."""

    type: Annotated[str, Field(max_length=316)]
    status: ConditionStatus
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    last_transition_time: datetime | None = None
    reason: Annotated[str, Field(max_length=1024)] | None = None
    message: Annotated[str, Field(max_length=32768)] | None = None


class OwnerReference(K8sModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sModel):
    """The parts of metav1.ObjectMeta the operator reads; everything else is kept as extra keys."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class LabelSelector(K8sModel):
    """A metav1.LabelSelector; an empty selector matches everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


@dataclass(frozen=True)
class PrinterColumn:
    """One column of ``kubectl get``."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str | None = None


@dataclass(frozen=True)
class CrdInfo:
    """How a top-level model is served by the API server."""

    group: str
    version: str
    kind: str
    plural: str
    scope: str  # "Namespaced" or "Cluster"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def singular(self) -> str:
        return self.kind.lower()


def _plain(value: Any) -> Any:
    """Deep-copy a Mapping/list tree (e.g. a kopf Body) into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class KubeObject(K8sModel):
    """A top-level Kubernetes object: apiVersion, kind, metadata (spec/status in subclasses).

    Parse a raw body (a dict, or a kopf ``body``) with ``Kind.from_body(body)``; write it back with
    ``obj.to_body()``.
    """

    crd: ClassVar[CrdInfo]

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse an object as the API server (or kopf) delivers it."""
        return cls.model_validate(_plain(body))

    def to_body(self) -> dict[str, Any]:
        """The object as the API server expects it, with apiVersion and kind filled in."""
        body = self.to_dict()
        head = {"apiVersion": self.api_version or self.crd.api_version, "kind": self.kind or self.crd.kind}
        return head | {k: v for k, v in body.items() if k not in head}

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
