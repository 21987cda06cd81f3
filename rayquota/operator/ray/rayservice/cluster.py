"""The RayClusters a RayService owns: built from ``rayClusterConfig``, and updated in place.

The nested ``rayClusterConfig.suspend`` is the queue's gate: it is copied into a child when the
child is created and never written by this module afterwards (an in-place update keeps the child's
own value), so only the queue integration lifts it. Placement the queue injected into a child's
pod templates (nodeSelector, tolerations) survives in-place updates for the same reason.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray.builders.hashing import spec_hash
from rayquota.operator.ray.rayservice.plan import WORKER_COUNT_FIELDS, ClusterChange, cluster_config
from rayquota.operator.ray.vocabulary import labels

RAYSERVICE_KIND = "RayService"
# kubectl's copy of what a user applied is about the RayService, not its clusters.
_ANNOTATIONS_NOT_COPIED = ("kubectl.kubernetes.io/last-applied-configuration",)
_NAME_SUFFIX_LENGTH = 5
_MAX_PREFIX = 63 - 1 - _NAME_SUFFIX_LENGTH - len(labels.SERVE_SERVICE_SUFFIX)


def new_cluster_name(service_name: str) -> str:
    """``<service>-<random suffix>``, short enough for its ``-serve-svc`` Service name."""
    alphabet = string.ascii_lowercase + string.digits
    suffix = "".join(secrets.choice(alphabet) for _ in range(_NAME_SUFFIX_LENGTH))
    return f"{service_name[:_MAX_PREFIX].rstrip('-.')}-{suffix}"


def child_selector(service_name: str) -> dict[str, str]:
    return {
        labels.ORIGINATED_FROM_CR_NAME: labels.label_value(service_name),
        labels.ORIGINATED_FROM_CRD: RAYSERVICE_KIND,
    }


def build_cluster(
    service: Mapping[str, Any], name: str, operator_version: str, *, autoscale_from_min: bool
) -> dict[str, Any]:
    """A new child. ``autoscale_from_min``: an incremental upgrade's pending cluster starts without
    replicas and grows with its Serve target capacity (as KubeRay does)."""
    meta = service["metadata"]
    goal = cluster_config(service)
    spec = copy.deepcopy(goal)
    if autoscale_from_min:
        for group in spec.get("workerGroupSpecs") or []:
            group.pop("replicas", None)
    annotations = {
        key: value
        for key, value in (meta.get("annotations") or {}).items()
        if key not in _ANNOTATIONS_NOT_COPIED
    }
    annotations.update(_stamp(goal, operator_version))
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {**(meta.get("labels") or {}), **child_selector(str(meta["name"]))},
            "annotations": annotations,
            "ownerReferences": [labels.owner_reference(service)],
        },
        "spec": spec,
    }


def _stamp(goal: Mapping[str, Any], operator_version: str) -> dict[str, str]:
    return {
        labels.HASH_ANNOTATION: spec_hash(goal),
        labels.NUM_WORKER_GROUPS_ANNOTATION: str(len(goal.get("workerGroupSpecs") or [])),
        labels.OPERATOR_VERSION_ANNOTATION: operator_version,
    }


def updated_cluster(
    live: Mapping[str, Any], service: Mapping[str, Any], change: ClusterChange, operator_version: str
) -> dict[str, Any]:
    """The child after an in-place change (PUT with the live resourceVersion)."""
    goal = cluster_config(service)
    updated = copy.deepcopy(dict(live))
    updated.pop("status", None)
    spec = updated.setdefault("spec", {})
    groups = spec.setdefault("workerGroupSpecs", [])
    if change == ClusterChange.SCALE_IN_PLACE:
        wanted = {group.get("groupName"): group for group in goal.get("workerGroupSpecs") or []}
        for group in groups:
            for key in WORKER_COUNT_FIELDS:
                value = (wanted.get(group.get("groupName")) or {}).get(key)
                if value is None:
                    group.pop(key, None)
                else:
                    group[key] = value
    elif change == ClusterChange.APPEND_WORKER_GROUPS:
        groups.extend(copy.deepcopy((goal.get("workerGroupSpecs") or [])[len(groups) :]))
    annotations = updated["metadata"].setdefault("annotations", {})
    annotations.update(_stamp(goal, operator_version))
    return updated
