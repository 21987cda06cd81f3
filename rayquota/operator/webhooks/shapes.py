"""The types a document's fields must have, judged before the webhooks read it.

A mutating webhook is called before the API server checks a custom object against its schema,
so any field may hold any type there. These checks walk the kind's structural schema (the one
the CRD is generated from) and name each field whose type is wrong, with the type it holds, and
each required field that is missing, in the API server's words; the webhooks refuse such a
document instead of failing on it."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from rayquota.api.common import KubeObject
from rayquota.api.crdgen import ALL_KINDS, crd_for

Schema = Mapping[str, Any]

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


@cache
def _schemas() -> dict[str, Schema]:
    models: dict[str, type[KubeObject]] = {model.crd.kind: model for model in ALL_KINDS}
    return {
        kind: crd_for(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for kind, model in models.items()
    }


def json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _fits(schema: Schema, value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    wanted = schema.get("type")
    if wanted is None:
        return True
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return json_type(value) == str(wanted)


def _errors(schema: Schema, value: Any, path: str, out: list[str], required: bool = True) -> None:
    if value is None:
        return  # a null where no null is declared is dropped by the server before validation
    if not _fits(schema, value):
        wanted = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        out.append(f'{path}: Invalid value: "{json_type(value)}": {path} must be of type {wanted}')
        return
    if isinstance(value, dict):
        # A mutating webhook answers before the schema, so it names a missing required field as
        # the API server would have (a null is a removal to the server).
        for key in (schema.get("required") or ()) if required else ():
            if value.get(key) is None:
                out.append(f"{path}.{key}: Required value" if path else f"{key}: Required value")
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if child is not None:
                _errors(child, item, f"{path}.{key}" if path else str(key), out, required)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if item is None:  # only a field's null is dropped, not an item's
                wanted = schema["items"].get("type")
                out.append(f'{where}: Invalid value: "null": {where} must be of type {wanted}')
            else:
                _errors(schema["items"], item, where, out, required)


def type_errors(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """Each field of `obj` (a custom object of `kind`) whose type its schema refuses; nothing for
    kinds the API server decodes itself (built-in kinds) or fields the schema leaves open."""
    schema = _schemas().get(kind)
    if schema is None:
        return []
    out: list[str] = []
    properties = schema.get("properties") or {}
    for key, value in obj.items():
        if key != "metadata" and key in properties:
            # A status is written by controllers (KubeRay's too, beside it), not by the user: only
            # its types are checked, never what our schema would require of it.
            _errors(properties[key], value, key, out, required=key != "status")
    return out
