"""Whether a pod set may go to a flavor's nodes: its nodeSelector and required node affinity
against the flavor's node labels, as Kueue v0.19's flavor assigner reads them.

Only the keys the flavor's own ``nodeLabels`` name are looked at: a selector or expression on
another key is for the node scheduler, not for flavor choice. The required node affinity is a
list of terms, any one of which must hold (OR); a term's expressions must all hold (AND). A term
left with no expression on the flavor's keys places no constraint, so then the whole affinity
holds (the terms are ORed) and only the nodeSelector decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_WITH_VALUES = ("In", "NotIn")
_WITHOUT_VALUES = ("Exists", "DoesNotExist")
_NUMERIC = ("Gt", "Lt")
OPERATORS = (*_WITH_VALUES, *_WITHOUT_VALUES, *_NUMERIC)


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry of a node selector term (Kubernetes' operators)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"operator {self.operator} on key {self.key!r}"
        if self.operator not in OPERATORS:
            raise ValueError(f"operator: {self.operator!r} is not one of {', '.join(OPERATORS)}")
        if self.operator in _WITH_VALUES and not self.values:
            raise ValueError(f"values: {where} needs at least one value")
        if self.operator in _WITHOUT_VALUES and self.values:
            raise ValueError(f"values: {where} takes none, got {list(self.values)}")
        numeric = self.operator in _NUMERIC
        if numeric and (len(self.values) != 1 or _integer(self.values[0]) is None):
            raise ValueError(f"values: {where} needs one integer, got {list(self.values)}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        number, bound = _integer(value), _integer(self.values[0])
        if number is None or bound is None:
            return False
        return number > bound if self.operator == "Gt" else number < bound


NodeSelectorTerm = tuple[NodeSelectorRequirement, ...]
"""The expressions of one term, all of which must hold."""

NodeAffinity = tuple[NodeSelectorTerm, ...]
"""``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``; ``()``: none."""


def _integer(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def selector_mismatch(node_selector: Mapping[str, str], labels: Mapping[str, str]) -> str | None:
    """The first ``key=value`` of the nodeSelector the flavor labels differently, or None."""
    for key, value in node_selector.items():
        if key in labels and labels[key] != value:
            return f"{key}={value}"
    return None


def affinity_matches(affinity: NodeAffinity, labels: Mapping[str, str]) -> bool:
    """Whether the required node affinity holds for nodes labelled ``labels``, on their keys."""
    kept: list[NodeSelectorTerm] = []
    for term in affinity:
        relevant = tuple(e for e in term if e.key in labels)
        if not relevant:
            return True
        kept.append(relevant)
    return not kept or any(all(e.matches(labels) for e in term) for term in kept)
