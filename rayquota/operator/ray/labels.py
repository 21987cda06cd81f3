"""KubeRay's label and annotation names, and the names of the objects the operator creates."""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

# Labels on every Ray pod (same keys as KubeRay, so existing selectors keep working).
RAY_CLUSTER = "ray.io/cluster"
RAY_NODE_TYPE = "ray.io/node-type"
RAY_GROUP = "ray.io/group"
RAY_IS_RAY_NODE = "ray.io/is-ray-node"
RAY_IDENTIFIER = "ray.io/identifier"
CREATED_BY = "app.kubernetes.io/created-by"
APP_NAME = "app.kubernetes.io/name"
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
# Multi-host worker groups (numOfHosts > 1): the pods of one replica share a replica name.
RAY_WORKER_REPLICA_NAME = "ray.io/worker-group-replica-name"
RAY_REPLICA_HOST_INDEX = "ray.io/replica-host-index"
# Set on the batch Job that submits a RayJob (K8sJobMode) and on the cluster a RayJob created.
RAY_JOB_SUBMITTER = "ray.io/job-submitter"

CREATED_BY_VALUE = "rayquota-operator"
APP_NAME_VALUE = "kuberay"
HEAD_NODE = "head"
WORKER_NODE = "worker"
HEAD_GROUP_NAME = "headgroup"

# Annotations on the head pod (the Recreate strategy compares them with the live spec).
HASH_ANNOTATION = "ray.io/hash-without-replicas-and-workers-to-delete"
OPERATOR_VERSION_ANNOTATION = "ray.io/kuberay-version"
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"

HEAD_SERVICE_SUFFIX = "-head-svc"
SERVE_SERVICE_SUFFIX = "-serve-svc"

_MAX_LABEL_VALUE = 63
_INVALID_LABEL_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def label_value(value: str) -> str:
    """Make a string a valid label value: at most 63 chars, alphanumeric at both ends."""
    value = _INVALID_LABEL_CHARS.sub("-", value)[:_MAX_LABEL_VALUE]
    return value.strip("-_.")


def identifier(cluster_name: str, node_type: str) -> str:
    return label_value(f"{cluster_name}-{node_type}")


def pod_labels(cluster_name: str, node_type: str, group_name: str) -> dict[str, str]:
    return {
        RAY_CLUSTER: label_value(cluster_name),
        RAY_NODE_TYPE: node_type,
        RAY_GROUP: label_value(group_name),
        RAY_IS_RAY_NODE: "yes",
        RAY_IDENTIFIER: identifier(cluster_name, node_type),
        CREATED_BY: CREATED_BY_VALUE,
        APP_NAME: APP_NAME_VALUE,
    }


def cluster_selector(cluster_name: str) -> str:
    """Label selector for every pod of one RayCluster made by this operator."""
    return f"{RAY_CLUSTER}={label_value(cluster_name)},{CREATED_BY}={CREATED_BY_VALUE}"


def head_service_name(cluster_name: str) -> str:
    # A Service name must be a DNS-1035 label (<= 63 chars); keep the suffix intact.
    return _truncate(cluster_name, 63 - len(HEAD_SERVICE_SUFFIX)) + HEAD_SERVICE_SUFFIX


def serve_service_name(cluster_name: str) -> str:
    return _truncate(cluster_name, 63 - len(SERVE_SERVICE_SUFFIX)) + SERVE_SERVICE_SUFFIX


def _random_suffix(length: int = 5) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _truncate(name: str, limit: int) -> str:
    return name[:limit].rstrip("-.")


def head_pod_name(cluster_name: str) -> str:
    return f"{_truncate(cluster_name, 50)}-head-{_random_suffix()}"


def worker_pod_name(cluster_name: str, group_name: str) -> str:
    return f"{_truncate(f'{cluster_name}-{group_name}', 50)}-worker-{_random_suffix()}"


def replica_name(group_name: str) -> str:
    return label_value(f"{_truncate(group_name, 56)}-{_random_suffix()}")


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to a live object, so the garbage collector cascades deletion."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


# spec.managedBy: KubeRay reconciles an object only when this is unset or names KubeRay; any other
# controller (e.g. Kueue's MultiKueue, which mirrors objects to worker clusters) owns it instead.
# We stand in for KubeRay, so KubeRay's own value counts as ours.
MANAGED_BY_KUBERAY = "ray.io/kuberay-operator"
MANAGED_BY_RAYQUOTA = "rayquota.io/operator"


def managed_by_other_controller(body: Mapping[str, Any]) -> str | None:
    """The foreign controller named in spec.managedBy, or None when the object is ours."""
    manager = (body.get("spec") or {}).get("managedBy")
    if not manager or manager in (MANAGED_BY_KUBERAY, MANAGED_BY_RAYQUOTA):
        return None
    return str(manager)


# RayService children. The hash annotation (HASH_ANNOTATION) on a child RayCluster records the
# rayClusterConfig it was built from; the worker-group count lets appended groups update in place.
NUM_WORKER_GROUPS_ANNOTATION = "ray.io/num-worker-groups"
# The serveConfigV2 last applied to a child cluster (re-applied with a new target_capacity during
# incremental upgrades, and compared to tell when the Serve config changed).
SERVE_CONFIG_ANNOTATION = "rayquota.io/serve-config-v2"
# When a RayService's leftover cluster is deleted (seconds since the epoch): kept on the cluster so
# an operator restart does not forget or restart rayClusterDeletionDelaySeconds.
DELETE_AFTER_ANNOTATION = "rayquota.io/delete-after"
