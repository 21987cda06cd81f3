"""Compare two CustomResourceDefinitions' schemas field by field (rayquota's against KubeRay's).

The walk runs over both ``openAPIV3Schema`` trees in step and reports, per path, every aspect
that differs: a property only one side declares, and for a property both declare its type,
format, required list, enum, default, bounds, pattern, nullability and ``x-kubernetes-*`` markers
(CEL rules included). Descriptions are not compared (KubeRay generates its CRDs without them).

A difference is a :class:`Difference`; :func:`allowed` matches one against an allow-list of
``(path glob, aspect)`` entries, each of which carries the reason rayquota differs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Aspects compared by value at every node both sides declare.
COMPARED_KEYS = (
    "type",
    "format",
    "enum",
    "default",
    "nullable",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
)


@dataclass(frozen=True)
class Difference:
    """One aspect of one field on which the two schemas disagree.

    ``path`` is dotted from the root (``spec.workerGroupSpecs[].template``; ``{}`` for a map's
    values); ``aspect`` is a schema key (``default``, ``required``...) or ``property`` for a field
    only one side declares."""

    path: str
    aspect: str
    ours: Any
    theirs: Any

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.aspect}: rayquota {self.ours!r}, KubeRay {self.theirs!r}"


@dataclass(frozen=True)
class Allowance:
    """An allowed difference: a path glob (``*`` within a path, ``**`` across), an aspect (``*``
    for any) and why rayquota differs there."""

    path: str
    aspect: str
    why: str

    def matches(self, difference: Difference) -> bool:
        if self.aspect not in ("*", difference.aspect):
            return False
        return _glob(self.path, difference.path)


def _glob(pattern: str, path: str) -> bool:
    """``*`` matches within one dotted segment, ``**`` across segments; all else literally."""
    parts = [re.escape(chunk).replace(r"\*", "[^.]*") for chunk in pattern.split("**")]
    return re.fullmatch(".*".join(parts), path) is not None


def schema_of(crd: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(f"{crd['metadata']['name']} has no version {version}")


def differences(ours: dict[str, Any], theirs: dict[str, Any], path: str = "") -> Iterator[Difference]:
    """Every difference between two schema nodes and their descendants."""
    for key in COMPARED_KEYS:
        if ours.get(key) != theirs.get(key):
            yield Difference(path, key, ours.get(key), theirs.get(key))
    our_required, their_required = sorted(ours.get("required", [])), sorted(theirs.get("required", []))
    if our_required != their_required:
        yield Difference(path, "required", our_required, their_required)
    our_props, their_props = ours.get("properties", {}), theirs.get("properties", {})
    for name in sorted(set(our_props) | set(their_props)):
        child = f"{path}.{name}" if path else name
        if name not in their_props:
            yield Difference(child, "property", "declared", None)
        elif name not in our_props:
            yield Difference(child, "property", None, "declared")
        else:
            yield from differences(our_props[name], their_props[name], child)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        our_child, their_child = ours.get(key), theirs.get(key)
        if isinstance(our_child, dict) and isinstance(their_child, dict):
            yield from differences(our_child, their_child, path + suffix)
        elif our_child != their_child:
            yield Difference(path, key, _shape(our_child), _shape(their_child))


def _shape(value: Any) -> Any:
    """A schema node shown briefly in a difference."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k in ("type", "x-kubernetes-preserve-unknown-fields")}
    return value


def allowed(difference: Difference, allowances: list[Allowance]) -> Allowance | None:
    for allowance in allowances:
        if allowance.matches(difference):
            return allowance
    return None
