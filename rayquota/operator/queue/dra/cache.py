"""The operator's claim source: the DRA settings with the watch-fed caches of
ResourceClaimTemplates and DeviceClasses. The queue's setup builds one and hands it to the kinds'
records (their demand read), the quantity check, the gate and the caps; nothing finds it any
other way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core import Informer, Manager
from rayquota.operator.core import resources as core_resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.dra.settings import DraSettings


@dataclass(frozen=True)
class ClaimCache:
    """``claim_templates`` and ``device_classes`` are watched only where device classes are
    mapped (:meth:`register`); without them a template names nothing and no class backs anything."""

    settings: DraSettings
    claim_templates: Informer | None = None
    device_classes: Informer | None = None

    @classmethod
    def register(cls, manager: Manager, settings: DraSettings) -> ClaimCache:
        if not (settings.integration and settings.mappings):
            return cls(settings)
        return cls(
            settings,
            manager.informer(core_resources.RESOURCE_CLAIM_TEMPLATES),
            manager.informer(core_resources.DEVICE_CLASSES),
        )

    def claim_reading(self, namespace: str) -> ClaimReading:
        """The settings, this namespace's ResourceClaimTemplates and the DeviceClasses, read
        from the caches when looked up (a reading kept stays current)."""
        informer = self.claim_templates

        def claim_template(name: str) -> Mapping[str, Any] | None:
            return None if informer is None else informer.store.get(namespace, name)

        return ClaimReading(self.settings, claim_template, self.device_classes_naming)

    def device_classes_naming(self, resource: str) -> list[Obj]:
        """The DeviceClasses whose ``spec.extendedResourceName`` is ``resource``."""
        informer = self.device_classes
        if informer is None:
            return []
        return [
            c for c in informer.store.list() if (c.get("spec") or {}).get("extendedResourceName") == resource
        ]
