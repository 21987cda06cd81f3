"""metav1.Condition lists: set, remove and read, keeping lastTransitionTime honest."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from rayquota.operator.core.gate import QUOTA_RESERVED, QueueCondition


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


def with_queue_condition(
    conditions: list[dict[str, Any]], verdict: QueueCondition | None, *, now: str
) -> list[dict[str, Any]]:
    """Carry the queue's verdict as the ``QuotaReserved`` condition; an object that is not
    queued (any more) carries none. Unchanged verdicts leave the list as it was."""
    if verdict is None:
        return remove_condition(conditions, QUOTA_RESERVED)
    current = find(conditions, QUOTA_RESERVED)
    status_text = "True" if verdict.admitted else "False"
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
        status_text,
        verdict.reason,
        verdict.message,
    ):
        return conditions
    return set_condition(
        conditions, QUOTA_RESERVED, verdict.admitted, verdict.reason, verdict.message, now=now
    )
