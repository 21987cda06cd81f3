"""``kubectl rayquota create resourceflavor`` and ``list resourceflavor``: the body and the row
(pure). kueuectl's flags (Kueue v0.19.2): ``--node-labels k=v,...``, ``--node-taints
KEY[=VALUE]:EFFECT,...`` and ``--tolerations [KEY[=VALUE]][:EFFECT],...`` (a toleration with
a value is ``Equal``, else ``Exists``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rayquota.kueuectl_bodies import FlagError, age
from rayquota.operator.queue.kueue.api_group import QueueApi

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A label key (an optional DNS-subdomain prefix and a name) and a label value.
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _key_value_effect(flag: str, item: str) -> tuple[str, str, str]:
    pair, _, effect = item.partition(":")
    key, _, value = pair.partition("=")
    if ":" in effect or "=" in value:
        raise FlagError(f"{flag} {item!r}: expected KEY[=VALUE][:EFFECT]")
    if key and not _LABEL_KEY.match(key):
        raise FlagError(f"{flag} {item!r}: {key!r} is not a label key")
    if value and not _LABEL_VALUE.match(value):
        raise FlagError(f"{flag} {item!r}: {value!r} is not a label value")
    if effect and effect not in EFFECTS:
        raise FlagError(f"{flag} {item!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}")
    return key, value, effect


def node_labels(value: str | None) -> dict[str, str]:
    labels = {}
    for item in _items(value):
        key, eq, val = item.partition("=")
        if not eq or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(val):
            raise FlagError(f"--node-labels {item!r}: expected LABEL_KEY=LABEL_VALUE")
        labels[key] = val
    return labels


def node_taints(value: str | None) -> list[dict[str, str]]:
    taints: list[dict[str, str]] = []
    for item in _items(value):
        key, val, effect = _key_value_effect("--node-taints", item)
        if not key or not effect:
            raise FlagError(f"--node-taints {item!r}: expected KEY[=VALUE]:EFFECT")
        if any(t["key"] == key and t["effect"] == effect for t in taints):
            raise FlagError(f"--node-taints {item!r}: taint {key}:{effect} given twice")
        taints.append({"key": key, **({"value": val} if val else {}), "effect": effect})
    return taints


def tolerations(value: str | None) -> list[dict[str, str]]:
    out = []
    for item in _items(value):
        key, val, effect = _key_value_effect("--tolerations", item)
        if val and not key:
            raise FlagError(f"--tolerations {item!r}: a value needs a key")
        toleration = {"key": key} if key else {}
        toleration["operator"] = "Equal" if key and val else "Exists"
        toleration |= ({"value": val} if val else {}) | ({"effect": effect} if effect else {})
        out.append(toleration)
    return out


def resource_flavor_body(
    api: QueueApi, name: str, labels: str | None, taints: str | None, tolerated: str | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for field, content in (
        ("nodeLabels", node_labels(labels)),
        ("nodeTaints", node_taints(taints)),
        ("tolerations", tolerations(tolerated)),
    ):
        if content:
            spec[field] = content
    resource = api.resource_flavors
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


RESOURCE_FLAVOR_HEADER = ["NAME", "NODE LABELS", "AGE"]


def resource_flavor_row(flavor: Mapping[str, Any], now: datetime) -> list[str]:
    labels = ((flavor.get("spec") or {}).get("nodeLabels") or {}).items()
    return [
        str(flavor["metadata"]["name"]),
        ", ".join(sorted(f"{k}={v}" for k, v in labels)),
        age(flavor, now),
    ]
