"""Names and label keys of the queue integration, defined once."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.queue.dra.settings import DraSettings

QUEUE_LABEL = "rayquota.io/queue-name"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "rayquota.io/priority-class"
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_LOCAL_QUEUE = "default"

# On a Workload: which object it stands for (the ownerReference says it too, but a
# label lets the CLI and the informer index find it with a selector).
WORKLOAD_OWNER_KIND_LABEL = "rayquota.io/owner-kind"
WORKLOAD_OWNER_NAME_LABEL = "rayquota.io/owner-name"
# On a pod template: the flavor's nodeSelector and tolerations we injected, so restore
# removes exactly those and nothing the user wrote.
INJECTED_ANNOTATION = "rayquota.io/injected-flavor"
# On a queued object: a human-readable copy of why it waits.
QUEUE_CONDITION = "QuotaReserved"
# On a Workload we create: its owner's creationTimestamp and creation resourceVersion, the queue
# order among objects created in the same second (see creation_order.py).
CREATION_ORDER_ANNOTATION = "rayquota.io/creation-order"
# On ClusterQueues (while workloads hold their quota) and ResourceFlavors (while a ClusterQueue
# names them): deletion waits until nothing uses them. Kueue's semantics, our group's name.
RESOURCE_IN_USE_FINALIZER = "rayquota.io/resource-in-use"

MAX_NAME = 253
_HASH_LENGTH = 5
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def short_hash(text: str, length: int = _HASH_LENGTH) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def workload_name(kind: str, name: str, uid: str) -> str:
    """``<kind>-<name>-<short hash of uid>``, lower case, a valid object name.

    The uid makes a re-created object (same name) get a new Workload, so a stale
    admission can never be inherited.
    """
    suffix = f"-{short_hash(uid)}"
    stem = f"{kind}-{name}".lower()[: MAX_NAME - len(suffix)].rstrip("-.")
    return stem + suffix


def dns_label(text: str, limit: int = 63) -> str:
    """Make ``text`` a DNS label (pod set names must be); a hash keeps altered names distinct."""
    clean = _NOT_DNS.sub("-", text.lower()).strip("-")
    if clean == text and len(clean) <= limit:
        return clean
    suffix = f"-{short_hash(text)}"
    return (clean[: limit - len(suffix)].strip("-") or "x") + suffix


@dataclass(frozen=True)
class QueueSettings:
    """Which labels name a queue and a priority class; whether unlabelled objects are queued."""

    queue_label_keys: Sequence[str] = (QUEUE_LABEL, KUEUE_QUEUE_LABEL)
    priority_label_keys: Sequence[str] = (PRIORITY_CLASS_LABEL, KUEUE_PRIORITY_CLASS_LABEL)
    manage_jobs_without_queue_name: bool = False
    # Kueue's resources.deviceClassMappings and DRA switches (queue/dra/settings.py).
    dra: DraSettings = field(default_factory=DraSettings)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def explicit_queue_name(obj: Mapping[str, Any], settings: QueueSettings) -> str | None:
    labels = _labels(obj)
    for key in settings.queue_label_keys:
        if labels.get(key):
            return str(labels[key])
    return None


def queue_name_of(
    obj: Mapping[str, Any], settings: QueueSettings, default_queues_since: Mapping[str, str] | None = None
) -> str | None:
    """The LocalQueue an object is submitted to, or None when it is not queued.

    With ``manage_jobs_without_queue_name`` an unlabelled object goes to its namespace's
    LocalQueue ``default`` when that queue exists and the object was not created before it
    (``default_queues_since``: namespace -> the queue's creationTimestamp). An object that was
    already there keeps running unqueued, as Kueue, which names the default queue only at
    creation: otherwise the next update of a running object would suspend it.
    """
    explicit = explicit_queue_name(obj, settings)
    if explicit is not None:
        return explicit
    if not settings.manage_jobs_without_queue_name:
        return None
    meta = obj.get("metadata") or {}
    since = (default_queues_since or {}).get(str(meta.get("namespace", "")))
    if since is None:
        return None
    # RFC 3339 in UTC with whole seconds, as the API server writes them, compare as strings. No
    # timestamp yet: the object is being created (an admission review).
    created = str(meta.get("creationTimestamp") or "")
    return DEFAULT_LOCAL_QUEUE if not created or created >= since else None


def priority_class_of(obj: Mapping[str, Any], settings: QueueSettings) -> str | None:
    labels = _labels(obj)
    for key in settings.priority_label_keys:
        if labels.get(key):
            return str(labels[key])
    return None
