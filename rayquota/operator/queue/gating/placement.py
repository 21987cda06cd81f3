"""Putting an admitted flavor's nodeSelector and tolerations into pod templates, and taking
them out again, touching nothing the user wrote."""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableMapping
from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.demand.podsets import injected_placement
from rayquota.queueing import ResourceFlavor


def flavor_placement(flavors: Iterable[ResourceFlavor]) -> dict[str, Any]:
    """The merged nodeSelector and tolerations of the flavors one pod set was admitted to."""
    selector: dict[str, str] = {}
    tolerations: list[dict[str, str]] = []
    for flavor in flavors:
        selector.update(flavor.node_labels)
        for t in flavor.tolerations:
            raw = {
                k: v
                for k, v in (
                    ("key", t.key),
                    ("operator", t.operator),
                    ("value", t.value),
                    ("effect", t.effect),
                )
                if v
            }
            if raw not in tolerations:
                tolerations.append(raw)
    return {"nodeSelector": selector, "tolerations": tolerations}


def inject(template: MutableMapping[str, Any], placement: dict[str, Any]) -> None:
    """Add ``placement`` to the template (first undoing an earlier injection), remembering
    exactly what was added. A user's own nodeSelector value for a key is never overwritten."""
    restore(template)
    spec = template.setdefault("spec", {})
    selector = spec.setdefault("nodeSelector", {})
    added_selector = {k: v for k, v in placement["nodeSelector"].items() if k not in selector}
    selector.update(added_selector)
    tolerations = spec.setdefault("tolerations", [])
    added_tolerations = [t for t in placement["tolerations"] if t not in tolerations]
    tolerations.extend(added_tolerations)
    if not selector:
        del spec["nodeSelector"]
    if not tolerations:
        del spec["tolerations"]
    if added_selector or added_tolerations:
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[naming.INJECTED_ANNOTATION] = json.dumps(
            {"nodeSelector": added_selector, "tolerations": added_tolerations}, sort_keys=True
        )


def restore(template: MutableMapping[str, Any]) -> None:
    """Remove what :func:`inject` added (on eviction, the object goes back as it was written)."""
    injected = injected_placement(template)
    if not injected:
        return
    spec = template.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    for key, value in (injected.get("nodeSelector") or {}).items():
        if selector.get(key) == value:
            del selector[key]
    if "nodeSelector" in spec and not selector:
        del spec["nodeSelector"]
    added = injected.get("tolerations") or []
    if "tolerations" in spec:
        spec["tolerations"] = [t for t in spec["tolerations"] if t not in added]
        if not spec["tolerations"]:
            del spec["tolerations"]
    annotations = template["metadata"]["annotations"]
    del annotations[naming.INJECTED_ANNOTATION]
    if not annotations:
        del template["metadata"]["annotations"]
    if not template["metadata"]:
        del template["metadata"]
