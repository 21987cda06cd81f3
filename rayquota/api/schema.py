"""Turn a model's pydantic JSON schema into a Kubernetes structural OpenAPI v3 schema.

Pydantic describes the models in JSON Schema (draft 2020-12): ``$ref`` into ``$defs``, ``Optional``
as ``anyOf [X, null]``, titles everywhere, ``additionalProperties: true`` for ``extra="allow"``.
The API server wants a *structural* schema instead: every node has a ``type`` (or is an explicit
int-or-string / preserve-unknown-fields node), no references, no ``null`` branches. The mapping:

- ``$ref``                     -> the referenced definition, inlined (siblings such as defaults kept)
- ``anyOf [X, null]``          -> X, and the field is simply not required (null is pruned by the server)
- ``extra="allow"``            -> dropped: the server prunes undeclared fields, the models keep them
- ``dict[str, X]``             -> ``type: object`` with ``additionalProperties: X``
- ``dict[str, Any]``           -> ``type: object`` with ``x-kubernetes-preserve-unknown-fields``
- enums / Literal              -> ``type: string`` with ``enum``
- field defaults               -> ``default`` for scalars outside ``status`` (the server applies them)
- ``x-kubernetes-*`` keys      -> passed through (CEL rules, list types, int-or-string)
- a Kubernetes type            -> Kubernetes' own schema (``k8s_openapi``), with an optional overlay
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from rayquota.api import k8s_openapi

# Keys copied verbatim from a pydantic node into the structural node.
_PASSTHROUGH = (
    "type",
    "format",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)
_FORMATS_KEPT = {"date-time", "int32", "int64"}


class SchemaError(ValueError):
    """The model uses a construct that has no structural-schema equivalent."""


def structural_schema(
    model: type[BaseModel],
    *,
    opaque_root_properties: dict[str, dict[str, Any]] | None = None,
    status_property: str = "status",
) -> dict[str, Any]:
    """The structural schema of ``model``.

    ``opaque_root_properties`` replaces named root properties wholesale (e.g. ``metadata``, which the
    API server validates itself). Defaults are not emitted below ``status_property``.
    """
    raw = model.model_json_schema(by_alias=True, mode="validation")
    converter = _Converter(raw.get("$defs", {}))
    root = converter.convert(raw, path="")
    overrides = opaque_root_properties or {}
    props = root.get("properties", {})
    for name, replacement in overrides.items():
        if name in props:
            props[name] = replacement
    if status_property in props:
        props[status_property] = _strip_defaults(props[status_property])
    return root


def _strip_defaults(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "default":
            continue
        if key == "properties":
            out[key] = {name: _strip_defaults(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _strip_defaults(value)
        else:
            out[key] = value
    return out


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self._defs = defs
        self._k8s: dict[str, Any] | None = None

    def _resolve(self, ref: str) -> dict[str, Any]:
        prefix = "#/$defs/"
        if not ref.startswith(prefix):
            raise SchemaError(f"unsupported $ref {ref!r}")
        return dict(self._defs[ref[len(prefix) :]])

    def _flatten(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        """Inline references and strip null branches until a single concrete node remains."""
        node = dict(node)
        while True:
            if "$ref" in node:
                target = self._resolve(node.pop("$ref"))
                # The referencing site wins for description/default; the definition supplies the rest.
                node = {**target, **node}
                continue
            if "allOf" in node and len(node["allOf"]) == 1:
                inner = node.pop("allOf")[0]
                node = {**inner, **node}
                continue
            if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
                branches = [b for b in node["anyOf"] if b != {"type": "null"}]
                if len(branches) != 1:
                    raise SchemaError(f"{path or '<root>'}: union of several types is not structural")
                del node["anyOf"]
                if node.get("default", "") is None:
                    del node["default"]
                node = {**branches[0], **node}
                continue
            return node

    def convert(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        node = self._flatten(node, path)
        out: dict[str, Any] = {}
        description = node.get("description")
        if description:
            out["description"] = description
        if k8s_openapi.MARKER in node:
            out.update(self._kubernetes_type(node))
            return out

        if node.get("x-kubernetes-int-or-string"):
            out.update({k: v for k, v in node.items() if k not in ("title", "description", "default")})
            return out
        if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") == "object":
            out.update({k: v for k, v in node.items() if k.startswith("x-kubernetes-")})
            out["type"] = "object"
            if node.get("properties"):  # kept as given, but for these, which are validated
                out["properties"] = {
                    name: self.convert(child, f"{path}.{name}") for name, child in node["properties"].items()
                }
            return out

        for key in _PASSTHROUGH:
            if key in node:
                out[key] = node[key]
        if "const" in node:
            out["enum"] = [node["const"]]
            out.setdefault("type", "string")
        if out.get("format") not in _FORMATS_KEPT:
            out.pop("format", None)
        if "enum" in out:
            out.setdefault("type", "string")
        if "type" not in out:
            raise SchemaError(f"{path or '<root>'}: no type after conversion: {node}")

        if out["type"] == "object":
            self._convert_object(node, out, path)
        elif out["type"] == "array":
            out["items"] = self.convert(node.get("items", {}), f"{path}[]")

        if "default" in node and node["default"] is not None and _is_scalar(node["default"]):
            out["default"] = node["default"]
        for key, value in node.items():
            if key.startswith("x-kubernetes-"):
                out[key] = value
        return out

    def _kubernetes_type(self, node: dict[str, Any]) -> dict[str, Any]:
        if self._k8s is None:
            self._k8s = k8s_openapi.load()
        schema = k8s_openapi.resolve(node[k8s_openapi.MARKER], self._k8s)
        return _overlay(schema, node.get(k8s_openapi.OVERLAY, {}))

    def _convert_object(self, node: dict[str, Any], out: dict[str, Any], path: str) -> None:
        properties = node.get("properties")
        additional = node.get("additionalProperties")
        if properties:
            out["properties"] = {
                name: self.convert(child, f"{path}.{name}") for name, child in properties.items()
            }
            required = node.get("required")
            if required:
                out["required"] = list(required)
        elif isinstance(additional, dict):
            out["additionalProperties"] = self.convert(additional, f"{path}.*")
        else:
            # A map of anything: keep it as given rather than pruning it to {}.
            out["x-kubernetes-preserve-unknown-fields"] = True


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _overlay(schema: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``overlay``'s keys laid over it, recursively (rayquota's own rules on top of
    a Kubernetes type's schema)."""
    out = dict(schema)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
