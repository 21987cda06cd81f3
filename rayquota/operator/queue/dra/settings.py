"""The DRA settings, as the configuration gives them (``rayquota.config``; Kueue's names).

``resources.deviceClassMappings``: a list of ``{"name": <quota resource>, "deviceClassNames":
[<DeviceClass>, ...]}``. A device class named by two mappings counts as the first's resource.
``integration`` (Kueue's feature ``KueueDRAIntegration``, default on) and
``reject_when_disabled`` (``KueueDRARejectWorkloadsWhenDRADisabled``, default on): with the
integration off, a template with ``resourceClaims`` is refused, or (reject off) its devices are
charged nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAPPINGS_ENV = "RAYQUOTA_DEVICE_CLASS_MAPPINGS"
SETTING = "resources.deviceClassMappings"

# A qualified resource name (an optional DNS prefix, then a name), as Kueue validates them.
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DEVICE_CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class DeviceClassMapping:
    name: str
    device_class_names: tuple[str, ...]


@dataclass(frozen=True)
class DraSettings:
    mappings: tuple[DeviceClassMapping, ...] = ()
    integration: bool = True
    reject_when_disabled: bool = True
    resource_of: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        resource_of: dict[str, str] = {}
        for mapping in self.mappings:
            for device_class in mapping.device_class_names:
                resource_of.setdefault(device_class, mapping.name)
        object.__setattr__(self, "resource_of", resource_of)

    def lookup(self, device_class: str) -> str | None:
        """The quota resource a device class counts as, or None when no mapping covers it."""
        return self.resource_of.get(device_class)


def parse_mappings(raw: str) -> tuple[DeviceClassMapping, ...]:
    """``resources.deviceClassMappings`` from JSON; each error names the entry's field and value."""
    if not raw.strip():
        return ()
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{MAPPINGS_ENV} ({SETTING}): not JSON: {exc}") from exc
    return mappings_from(parsed)


def mappings_from(parsed: Any) -> tuple[DeviceClassMapping, ...]:
    """``resources.deviceClassMappings`` as read from the configuration file (a list of
    ``{name, deviceClassNames}``); each error names the entry's field and value."""
    if not isinstance(parsed, list):
        raise ValueError(f"{SETTING}: expected a list of mappings, got {parsed!r}")
    out = []
    seen: set[str] = set()
    for index, entry in enumerate(parsed):
        where = f"{SETTING}[{index}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected an object, got {entry!r}")
        name = entry.get("name")
        if not isinstance(name, str) or not _RESOURCE_NAME.match(name):
            raise ValueError(f"{where}.name: {name!r} is not a resource name")
        if name in seen:
            raise ValueError(f"{where}.name: {name!r} is mapped twice")
        seen.add(name)
        classes = entry.get("deviceClassNames")
        if not isinstance(classes, list) or not classes:
            raise ValueError(f"{where}.deviceClassNames: {classes!r}: expected a non-empty list")
        for position, device_class in enumerate(classes):
            if not isinstance(device_class, str) or not _DEVICE_CLASS.match(device_class):
                raise ValueError(
                    f"{where}.deviceClassNames[{position}]: {device_class!r} is not a DeviceClass name"
                )
        out.append(DeviceClassMapping(name, tuple(classes)))
    return tuple(out)
