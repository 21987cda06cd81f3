"""Kubernetes' own schemas for the types the ``ray.io`` CRDs embed (pod templates, env, Services...).

Source: Kubernetes' published OpenAPI v3 documents (``api/openapi-spec/v3`` of the
``k8s.io/kubernetes`` module; :data:`OPENAPI_VERSION` matches the ``k8s.io/api`` KubeRay v1.6.2
builds on). ``rayquota crds --k8s-openapi [DIR]`` reads them, keeps the definitions reachable from
:data:`ROOTS`, turns each into a structural CRD schema node and writes :data:`DATA_FILE`, which the
CRD generator inlines wherever a model field names a Kubernetes type (:func:`k8s_type`).

The conversion follows what a Go CRD generator makes of the same Go types, so the schemas agree with
KubeRay's: no descriptions (KubeRay generates without them), an embedded ``ObjectMeta`` reduced to
name, namespace, labels, annotations and finalizers, ``IntOrString`` and ``Quantity`` as
int-or-string nodes, list and map markers kept, and a field's default kept only where the Go type
declares one (a required field's zero value is not a default).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import WithJsonSchema

OPENAPI_VERSION = "v1.35.0"
SOURCE_MODULE = "k8s.io/kubernetes"
# Where the OpenAPI documents are inside SOURCE_MODULE (`rayquota crds --k8s-openapi` without a
# DIR fetches the module into Go's module cache: rayquota.localcluster.peers.downloaded_module).
SOURCE_DIR = Path("api", "openapi-spec", "v3")
DATA_FILE = Path(__file__).with_name("k8s_schemas.json")
# The model-side marker: a node {MARKER: "<definition name>"} is replaced by the stored schema.
MARKER = "x-rayquota-k8s-type"
# Beside the marker: rayquota's own rules laid over the Kubernetes schema (see schema.py).
OVERLAY = "x-rayquota-k8s-overlay"

CORE = "io.k8s.api.core.v1."
NETWORKING = "io.k8s.api.networking.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
ROOTS = (
    CORE + "PodTemplateSpec",
    CORE + "EnvVar",
    CORE + "EnvFromSource",
    CORE + "EnvVarSource",
    CORE + "VolumeMount",
    CORE + "SecurityContext",
    CORE + "ResourceRequirements",
    CORE + "Service",
    NETWORKING + "NetworkPolicyIngressRule",
    NETWORKING + "NetworkPolicyEgressRule",
    NETWORKING + "IngressTLS",
)
# The OpenAPI documents that hold the roots' definitions.
DOCUMENTS = ("api__v1_openapi.json", "apis__networking.k8s.io__v1_openapi.json")

# What a Go CRD generator writes for resource.Quantity (its pattern, verbatim).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
# An ObjectMeta inside another object, as KubeRay's CRDs declare it (generateEmbeddedObjectMeta).
EMBEDDED_OBJECT_META = {
    "type": "object",
    "properties": {
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "labels": _STRING_MAP,
        "name": {"type": "string"},
        "namespace": {"type": "string"},
    },
}
SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": _INT_OR_STRING,
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {**_INT_OR_STRING, "pattern": QUANTITY_PATTERN},
    META + "ObjectMeta": EMBEDDED_OBJECT_META,
    META + "Time": {"type": "string", "format": "date-time"},
    META + "MicroTime": {"type": "string", "format": "date-time"},
}
# Keys of an OpenAPI node a CRD schema keeps (the rest is documentation or client hints).
_KEPT = (
    "type",
    "format",
    "items",
    "properties",
    "additionalProperties",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)
_FORMATS = {"int32", "int64", "byte", "date-time"}
# Go types that embed LocalObjectReference inline: a Go CRD generator carries its
# `+structType=atomic` up to them, which the OpenAPI documents (where the fields are flattened) lose.
EMBED_ATOMIC_REFERENCE = frozenset(
    CORE + name
    for name in (
        "ConfigMapEnvSource",
        "SecretEnvSource",
        "ConfigMapVolumeSource",
        "ConfigMapProjection",
        "SecretProjection",
    )
)
# Defaults Kubernetes declares as `+default=ref(<Go constant>)`: OpenAPI resolves them, a Go CRD
# generator does not write them, so KubeRay's CRDs (and these) have none.
UNWRITTEN_DEFAULTS = frozenset(
    {(CORE + "AzureDiskVolumeSource", "cachingMode"), (CORE + "AzureDiskVolumeSource", "kind")}
)
_ZERO_DEFAULTS: tuple[Any, ...] = ({}, [])


class OpenAPIError(ValueError):
    """The OpenAPI documents lack a definition the CRDs need."""


def k8s_type(name: str, overlay: dict[str, Any] | None = None) -> WithJsonSchema:
    """Annotate a model field as the Kubernetes type ``name`` (short ``core.v1.X`` forms allowed),
    optionally with rayquota's own rules laid over its schema."""
    full = name if name.startswith("io.k8s.") else "io.k8s.api." + name
    return WithJsonSchema({MARKER: full, **({OVERLAY: overlay} if overlay else {})})


def k8s_list(name: str) -> WithJsonSchema:
    """Annotate a model field as a list of the Kubernetes type ``name``."""
    full = name if name.startswith("io.k8s.") else "io.k8s.api." + name
    return WithJsonSchema({"type": "array", "items": {MARKER: full}})


def read_definitions(source_dir: Path) -> dict[str, Any]:
    definitions: dict[str, Any] = {}
    for document in DOCUMENTS:
        path = source_dir / document
        if not path.is_file():
            raise OpenAPIError(f"{path} is missing: pass the api/openapi-spec/v3 directory of Kubernetes")
        definitions.update(json.loads(path.read_text(encoding="utf-8"))["components"]["schemas"])
    return definitions


def trimmed_schemas(definitions: dict[str, Any]) -> dict[str, Any]:
    """The converted definitions reachable from :data:`ROOTS`, by name."""
    out: dict[str, Any] = {}
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in out or name in SPECIAL:
            continue
        if name not in definitions:
            raise OpenAPIError(f"no definition {name} in the OpenAPI documents")
        definition = _convert(definitions[name], pending, name)
        if name in EMBED_ATOMIC_REFERENCE:
            definition["x-kubernetes-map-type"] = "atomic"
        out[name] = definition
    return dict(sorted(out.items()))


def _convert(node: dict[str, Any], pending: list[str], definition: str = "") -> dict[str, Any]:
    node = _unwrap(node)
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in SPECIAL:
            return dict(SPECIAL[name])
        pending.append(name)
        return {"$ref": name}
    out: dict[str, Any] = {}
    for key in _KEPT:
        if key not in node:
            continue
        value = node[key]
        if key == "properties":
            required = set(node.get("required", ()))
            value = {
                k: _property(child, k in required or (definition, k) in UNWRITTEN_DEFAULTS, pending)
                for k, child in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _convert(value, pending)
        elif key == "format" and value not in _FORMATS:
            continue
        out[key] = value
    return out


def _property(node: dict[str, Any], no_default: bool, pending: list[str]) -> dict[str, Any]:
    out = _convert(node, pending)
    default = node.get("default")
    # OpenAPI gives every non-pointer field its zero value as a default; a Go CRD generator writes
    # only declared ones. A required field's, or a struct's/list's zero value, was not declared.
    if "default" in node and not no_default and default not in _ZERO_DEFAULTS:
        if "$ref" in out:
            out = {"allOf": [out], "default": default}
        else:
            out["default"] = default
    return out


def _unwrap(node: dict[str, Any]) -> dict[str, Any]:
    """``allOf: [{$ref}]`` (how OpenAPI v3 attaches a default or description to a reference)."""
    if "allOf" in node and len(node["allOf"]) == 1:
        return {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
    return node


def load() -> dict[str, Any]:
    data = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    definitions: dict[str, Any] = data["definitions"]
    return definitions


def resolve(name: str, definitions: dict[str, Any]) -> dict[str, Any]:
    """The definition ``name`` with every reference inlined (a fresh copy)."""
    node = SPECIAL[name] if name in SPECIAL else _inline(definitions[name], definitions)
    copied: dict[str, Any] = json.loads(json.dumps(node))
    return copied


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return resolve(node["$ref"], definitions)
    if "allOf" in node:  # a referenced struct with a declared default
        return {**_inline(node["allOf"][0], definitions), "default": node["default"]}
    return {key: _inline(value, definitions) for key, value in node.items()}


def render(definitions: dict[str, Any]) -> str:
    document = {
        "generatedBy": "rayquota crds --k8s-openapi (rayquota/api/k8s_openapi.py); do not edit",
        "source": f"k8s.io/kubernetes@{OPENAPI_VERSION} api/openapi-spec/v3",
        "definitions": definitions,
    }
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def regenerate(source_dir: Path) -> Path:
    """Rewrite :data:`DATA_FILE` from the OpenAPI documents in ``source_dir``."""
    definitions = read_definitions(source_dir)
    DATA_FILE.write_text(render(trimmed_schemas(definitions)), encoding="utf-8")
    return DATA_FILE
