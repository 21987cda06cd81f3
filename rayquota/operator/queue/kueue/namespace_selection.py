"""What a ClusterQueue's unset ``spec.namespaceSelector`` means, per API group.

Kueue (``kueue.x-k8s.io``, v1beta1 and v1beta2 alike) reads an unset selector as Kubernetes'
nil selector: no namespace is eligible, and ``namespaceSelector: {}`` is how a queue says
"every namespace". rayquota.io keeps the meaning it has always had, every namespace, so
existing rayquota.io queues go on admitting; such a queue is warned about (the webhook's
admission warning and its Active condition's message), since the same manifest applied to Kueue
would admit nothing. See docs/kueue-api-mode.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue.kueue.kueue_shapes import KUEUE_GROUP

UNSET_SELECTOR_WARNING = (
    "spec.namespaceSelector is unset: rayquota.io reads that as every namespace, but Kueue's "
    "ClusterQueue reads it as no namespace; set namespaceSelector: {} (every namespace) or a "
    "selector to say which"
)


def is_kueue_object(body: Mapping[str, Any]) -> bool:
    """A body of Kueue's API group (its ``apiVersion``: the informer sets it on every item)."""
    return str(body.get("apiVersion") or "").split("/", 1)[0] == KUEUE_GROUP


def unset_selector_selects_nothing(body: Mapping[str, Any]) -> bool:
    """Whether an unset ``namespaceSelector`` on this ClusterQueue admits from no namespace."""
    return is_kueue_object(body)


def unset_selector_warning(body: Mapping[str, Any]) -> str | None:
    """The warning for a rayquota.io ClusterQueue without a ``namespaceSelector``, or None."""
    if is_kueue_object(body) or (body.get("spec") or {}).get("namespaceSelector") is not None:
        return None
    return UNSET_SELECTOR_WARNING
