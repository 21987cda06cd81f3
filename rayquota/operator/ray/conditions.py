"""metav1.Condition lists: set, remove and read, keeping lastTransitionTime honest."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any


def find(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for condition in conditions or []:
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    *,
    now: str,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """Return a new list with the condition set; the transition time moves only when status does."""
    result = [copy.deepcopy(c) for c in conditions if c.get("type") != type_]
    previous = find(conditions, type_)
    status_text = "True" if status else "False"
    transition = now
    if previous is not None and previous.get("status") == status_text and previous.get("lastTransitionTime"):
        transition = str(previous["lastTransitionTime"])
    condition: dict[str, Any] = {
        "type": type_,
        "status": status_text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    result.append(condition)
    return sorted(result, key=lambda c: str(c["type"]))


def remove_condition(conditions: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(c) for c in conditions if c.get("type") != type_]
