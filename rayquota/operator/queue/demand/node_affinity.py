"""A pod template's required node affinity, read for flavor matching (Kueue reads it too).

Only ``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchExpressions``
matter: preferred affinity does not restrict nodes, and ``matchFields`` name node fields a
flavor has no labels for (a term of only those places no constraint on the flavor, as an empty
term does in Kueue's matching). Pure: the input is a pod spec as the API server returns it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.queueing import NodeAffinity, NodeSelectorRequirement

TERMS_PATH = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def required_terms(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The pod spec's required node selector terms, as written (empty: none)."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return tuple(required.get("nodeSelectorTerms") or ())


def to_api(terms: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A pod spec's ``affinity`` holding just these required terms."""
    required = {"nodeSelectorTerms": [dict(t) for t in terms]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def from_api(terms: Sequence[Mapping[str, Any]], where: str) -> NodeAffinity:
    """The engine's terms. ValueError names the expression's field and value (``where`` is the
    pod spec's path)."""
    out = []
    for ti, term in enumerate(terms):
        expressions = []
        for ei, raw in enumerate(term.get("matchExpressions") or ()):
            field = f"{where}.{TERMS_PATH}[{ti}].matchExpressions[{ei}]"
            if not raw.get("key"):
                raise ValueError(f"{field}.key: a key is required, got {raw.get('key')!r}")
            try:
                expressions.append(
                    NodeSelectorRequirement(
                        str(raw["key"]),
                        str(raw.get("operator") or ""),
                        tuple(str(v) for v in raw.get("values") or ()),
                    )
                )
            except ValueError as exc:
                raise ValueError(f"{field}.{exc}") from exc
        out.append(tuple(expressions))
    return tuple(out)
