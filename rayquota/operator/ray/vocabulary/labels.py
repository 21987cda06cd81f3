"""KubeRay's label and annotation names, and the names of the objects the operator creates."""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Iterable, Mapping
from typing import Any

from rayquota.api.ray_v1 import JobSubmissionMode

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
# Every worker pod: the replica's index in its group, the lowest free one (0 .. replicas-1).
RAY_WORKER_REPLICA_INDEX = "ray.io/worker-group-replica-index"
# On the pods of a RayJob's submitter Job (ours only: the queue counts them as their own pod set).
RAY_JOB_SUBMITTER = "ray.io/job-submitter"
# On a RayJob's RayCluster: the RayJob's submissionMode.
RAY_JOB_SUBMISSION_MODE = "ray.io/job-submission-mode"
# On the headless Service of a cluster with multi-host worker groups.
RAY_HEADLESS_WORKER_SERVICE = "ray.io/headless-worker-svc"

# KubeRay's value by default, so monitoring, dashboards and network policies that select on it keep
# working; the configuration's kuberay.createdByLabel changes it (e.g. to run beside KubeRay in one
# namespace): the composition root sets it once, before any component is built.
KUBERAY_CREATED_BY_VALUE = "kuberay-operator"
CREATED_BY_VALUE = KUBERAY_CREATED_BY_VALUE


def set_created_by(value: str) -> None:
    """Called once at start by `rayquota.app` with kuberay.createdByLabel."""
    global CREATED_BY_VALUE
    CREATED_BY_VALUE = value or KUBERAY_CREATED_BY_VALUE


APP_NAME_VALUE = "kuberay"
HEAD_NODE = "head"
WORKER_NODE = "worker"
HEAD_GROUP_NAME = "headgroup"

# Annotations on the head pod (the Recreate strategy compares them with the live spec).
HASH_ANNOTATION = "ray.io/hash-without-replicas-and-workers-to-delete"
OPERATOR_VERSION_ANNOTATION = "ray.io/kuberay-version"
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"

# The init container of every worker that waits for the head's GCS.
WAIT_GCS_INIT_CONTAINER = "wait-gcs-ready"

HEAD_SERVICE_SUFFIX = "-head-svc"
SERVE_SERVICE_SUFFIX = "-serve-svc"
HEADLESS_SERVICE_SUFFIX = "-headless"

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


# On a RayCluster: once provisioned, a lost head pod is not re-created (KubeRay's SidecarMode).
DISABLE_PROVISIONED_HEAD_RESTART = "ray.io/disable-provisioned-head-restart"
# KubeRay's default for its CLUSTER_DOMAIN setting (RaySettings.cluster_domain, ray/settings.py).
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


def cluster_head_service_name(cluster: Mapping[str, Any]) -> str:
    """The head Service's actual name: ``headGroupSpec.headService.metadata.name`` when the
    RayCluster names it (KubeRay's rule), else ``<cluster>-head-svc``."""
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    custom = ((head.get("headService") or {}).get("metadata") or {}).get("name")
    return str(custom) if custom else head_service_name(str(cluster["metadata"]["name"]))


def head_service_fqdn(cluster: Mapping[str, Any], cluster_domain: str) -> str:
    """The head Service's DNS name in the cluster's domain (KubeRay's ``CLUSTER_DOMAIN``)."""
    namespace = cluster["metadata"]["namespace"]
    return f"{cluster_head_service_name(cluster)}.{namespace}.svc.{cluster_domain}"


def serve_service_name(cluster_name: str) -> str:
    return _truncate(cluster_name, 63 - len(SERVE_SERVICE_SUFFIX)) + SERVE_SERVICE_SUFFIX


def headless_service_name(cluster_name: str) -> str:
    """The Service multi-host workers use to reach each other (`<cluster>-headless`)."""
    return _truncate(cluster_name, 63 - len(HEADLESS_SERVICE_SUFFIX)) + HEADLESS_SERVICE_SUFFIX


def free_replica_indices(used: Iterable[int], count: int) -> list[int]:
    """The `count` lowest replica indices not in `used`, as KubeRay hands them out (gaps first)."""
    taken = set(used)
    free: list[int] = []
    candidate = 0
    while len(free) < count:
        if candidate not in taken:
            free.append(candidate)
        candidate += 1
    return free


def replica_indices_in_use(pods: Iterable[Mapping[str, Any]]) -> set[int]:
    """Replica indices carried by live worker pods (pods without a valid index are ignored)."""
    used: set[int] = set()
    for pod in pods:
        value = (pod["metadata"].get("labels") or {}).get(RAY_WORKER_REPLICA_INDEX)
        if value is not None and str(value).isdigit():
            used.add(int(value))
    return used


RANDOM_SUFFIX_LENGTH = 5


def _random_suffix(length: int = RANDOM_SUFFIX_LENGTH) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _truncate(name: str, limit: int) -> str:
    return name[:limit].rstrip("-.")


def kuberay_trimmed(name: str, limit: int, *, letter_first: bool) -> str:
    """A name cut as KubeRay cuts it: over `limit` characters it keeps the end; a leading
    punctuation mark (and with `letter_first` a leading digit) becomes "r"."""
    if len(name) > limit:
        name = name[len(name) - limit :]
    if name and (not name[0].isalnum() or (letter_first and name[0].isdigit())):
        name = "r" + name[1:]
    return name


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


def submission_mode(rayjob: Mapping[str, Any]) -> str:
    """A RayJob's spec.submissionMode with KubeRay's default (validation refuses unknown ones)."""
    return str((rayjob.get("spec") or {}).get("submissionMode") or JobSubmissionMode.K8S_JOB)


def rayjob_cluster_labels(rayjob: Mapping[str, Any]) -> dict[str, str]:
    """Labels of the RayCluster a RayJob creates: the RayJob's own labels, where it came from, and
    its submission mode (tools select on all three, as on KubeRay's)."""
    meta = rayjob["metadata"]
    mode = submission_mode(rayjob)
    return {
        **(meta.get("labels") or {}),
        ORIGINATED_FROM_CR_NAME: label_value(str(meta["name"])),
        ORIGINATED_FROM_CRD: "RayJob",
        RAY_JOB_SUBMISSION_MODE: str(mode),
    }


def rayjob_head_service_name(rayjob_name: str) -> str:
    """`<rayjob>-head-svc`: the RayJob's stable address, whichever cluster attempt serves it."""
    return head_service_name(rayjob_name)


# RayService children. The hash annotation (HASH_ANNOTATION) on a child RayCluster records the
# rayClusterConfig it was built from; the worker-group count lets appended groups update in place.
NUM_WORKER_GROUPS_ANNOTATION = "ray.io/num-worker-groups"
# The serveConfigV2 last applied to a child cluster (re-applied with a new target_capacity during
# incremental upgrades, and compared to tell when the Serve config changed).
SERVE_CONFIG_ANNOTATION = "rayquota.io/serve-config-v2"
# When a RayService's leftover cluster is deleted (seconds since the epoch): kept on the cluster so
# an operator restart does not forget or restart rayClusterDeletionDelaySeconds.
DELETE_AFTER_ANNOTATION = "rayquota.io/delete-after"
