"""The Workload a queued object is counted by: its first body, and the update that keeps it in
step with the object (spec, pod-set words, owner)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue import naming
from rayquota.operator.queue.demand.pod_set_words import POD_SET_WORDS_ANNOTATION, annotation_value
from rayquota.operator.queue.kueue.api_group import QueueApi
from rayquota.operator.ray.vocabulary import labels


def workload_spec(
    queue_name: str | None,
    pod_sets: Sequence[Mapping[str, Any]],
    priority: Mapping[str, Any],
    current: Obj | None,
) -> dict[str, Any]:
    """The Workload spec a queued object asks for (before the API group's shape).

    ``spec.active`` is the user's lever, as in Kueue: false suspends an admitted object and
    releases its quota once its pods are gone; true queues it again. A Workload deactivated by
    waitForPodsReady's ``backoffLimitCount`` stays inactive."""
    active = ((current or {}).get("spec") or {}).get("active", True) is not False
    return {"queueName": queue_name, "podSets": list(pod_sets), "active": active, **priority}


def new_workload(
    api: QueueApi,
    kind: str,
    obj: Obj,
    key: ObjectKey,
    spec: Mapping[str, Any],
    words: Mapping[str, str],
    creation_order: str,
) -> dict[str, Any]:
    """The Workload of `obj`, owned by it (the garbage collector removes it with the object)."""
    return {
        "apiVersion": api.workloads.api_version,
        "kind": "Workload",
        "metadata": {
            "name": key.name,
            "namespace": key.namespace,
            "labels": {
                naming.WORKLOAD_OWNER_KIND_LABEL: kind.lower(),
                naming.WORKLOAD_OWNER_NAME_LABEL: labels.label_value(str(obj["metadata"]["name"])),
            },
            "annotations": {
                naming.CREATION_ORDER_ANNOTATION: creation_order,
                POD_SET_WORDS_ANNOTATION: annotation_value(words),
            },
            "ownerReferences": [labels.owner_reference(obj)],
        },
        "spec": dict(spec),
    }


def updated_workload(
    workload: Obj, obj: Obj, spec: Mapping[str, Any], words: Mapping[str, str]
) -> dict[str, Any] | None:
    """`workload` with `spec` and the pod-set words, or None when it already has them."""
    current = workload.get("spec") or {}
    annotations = workload["metadata"].get("annotations") or {}
    worded = annotation_value(words)
    owners = workload["metadata"].get("ownerReferences") or []
    if (
        all(current.get(k) == v for k, v in spec.items())
        and annotations.get(POD_SET_WORDS_ANNOTATION) == worded
        and owners
    ):
        return None
    metadata = {**workload["metadata"], "annotations": {**annotations, POD_SET_WORDS_ANNOTATION: worded}}
    if not owners:
        # A prebuilt Workload (MultiKueue's, made before its object): adopted, so the garbage
        # collector removes it with the object.
        metadata["ownerReferences"] = [labels.owner_reference(obj)]
    return {**workload, "metadata": metadata, "spec": {**current, **spec}}
