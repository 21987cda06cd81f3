"""Partial admission of a batch/v1 Job, as Kueue's Job integration does it.

A Job annotated ``kueue.x-k8s.io/job-min-parallelism: "N"`` asks for its usual pod count with
``minCount`` N: when the whole count does not fit, the engine may admit as few as N pods
(:mod:`rayquota.queueing.flavors.partial_admission`). The Job then runs with ``spec.parallelism`` set to
the admitted count (and ``spec.completions`` too when ``kueue.x-k8s.io/job-completions-equal-
parallelism`` is ``"true"``). Kueue restores the parallelism from its Workload's spec when the
Job stops; rayquota records the parallelism the Job asked for in the annotation
``rayquota.io/job-parallelism`` when it lowers it, reads the demand from there while it is
set, and writes it back (dropping the annotation) when the Job is restored after an eviction.

The annotation is checked at creation as Kueue's webhook checks it: an integer between 1 and
the Job's pod count minus one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
ASKED_PARALLELISM_ANNOTATION = "rayquota.io/job-parallelism"
"""The parallelism the Job asked for, kept while it runs partially admitted with less."""

Body = Mapping[str, Any]


def _annotations(job: Body) -> Mapping[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def min_parallelism(job: Body) -> int | None:
    """The Job's ``minCount``; an annotation that is not an integer means none (as Kueue reads it)."""
    return _int_or_none(_annotations(job).get(MIN_PARALLELISM_ANNOTATION))


def asked_counts(job: Body) -> tuple[int | None, int | None]:
    """``spec.parallelism`` and ``spec.completions`` as the Job asked for them: the recorded
    parallelism while it runs with less (completions too, when they follow the parallelism)."""
    spec = job.get("spec") or {}
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    recorded = _int_or_none(_annotations(job).get(ASKED_PARALLELISM_ANNOTATION))
    if recorded is not None:
        parallelism = recorded
        if _syncs_completions(job):
            completions = recorded
    return (
        None if parallelism is None else int(parallelism),
        None if completions is None else int(completions),
    )


def _syncs_completions(job: Body) -> bool:
    return str(_annotations(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "")).lower() == "true"


def run_partially(after: dict[str, Any], pod_count: int, admitted: int | None) -> bool:
    """Lower the edited Job's parallelism to an admitted count below its pod count (and at least
    its minimum), recording the parallelism it asked for. Returns whether it runs partially."""
    min_count = min_parallelism(after)
    if min_count is None or admitted is None or not min_count <= admitted < pod_count:
        return False
    asked, _ = asked_counts(after)
    annotations = after.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[ASKED_PARALLELISM_ANNOTATION] = str(pod_count if asked is None else asked)
    spec = after.setdefault("spec", {})
    spec["parallelism"] = admitted
    if _syncs_completions(after):
        spec["completions"] = admitted
    return True


def restore_parallelism(after: dict[str, Any]) -> None:
    """Give the edited Job back the parallelism it asked for (after an eviction)."""
    annotations = (after.get("metadata") or {}).get("annotations") or {}
    recorded = _int_or_none(annotations.pop(ASKED_PARALLELISM_ANNOTATION, None))
    if recorded is None:
        return
    spec = after.setdefault("spec", {})
    spec["parallelism"] = recorded
    if _syncs_completions(after):
        spec["completions"] = recorded


def min_parallelism_refusal(job: Body, pod_count: int) -> str | None:
    """Kueue's check of the annotation at creation, in the API server's words."""
    text = _annotations(job).get(MIN_PARALLELISM_ANNOTATION)
    if text is None:
        return None
    path = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
    value = _int_or_none(text)
    if value is None:
        return f'{path}: Invalid value: "{text}": must be an integer'
    if value <= 0 or value >= pod_count:
        return f"{path}: Invalid value: {value}: should be between 0 and {pod_count - 1}"
    return None
