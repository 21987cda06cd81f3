"""The claim reading a demand read is given: the DRA settings, the ResourceClaimTemplate lookup of
the object's namespace and the DeviceClass lookup.

Kinds build their pod sets from API bodies (``podsets.pod_set``); a claim template and a
DeviceClass are other objects. A kind's record is built with a :class:`ClaimSource` (the
operator's watch-fed :class:`~rayquota.operator.queue.dra.cache.ClaimCache`, passed by the queue's
setup) and reads the object's namespace from it in its ``pod_sets``; every function here takes
the reading explicitly. With no reading (``None``) claims are charged nothing and refuse nothing.
Nothing here is held between calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rayquota.operator.queue.dra.claims import ClaimTemplateLookup, TemplateCharges, template_charges
from rayquota.operator.queue.dra.extended import (
    BackedRequests,
    DeviceClassLookup,
    backed_requests,
    is_extended_resource_name,
    no_device_classes,
)
from rayquota.operator.queue.dra.settings import DraSettings
from rayquota.operator.ray.builders.pod_resources import RequestsOf, pod_requests


@dataclass(frozen=True)
class ClaimReading:
    """What one namespace's demand read looks claims up in. A reading is a source too: the same
    lookups for every namespace (the simulator, the benchmarks and the unit tests pass one)."""

    settings: DraSettings
    claim_template: ClaimTemplateLookup
    device_classes: DeviceClassLookup = no_device_classes

    def claim_reading(self, namespace: str) -> ClaimReading:
        return self


class ClaimSource(Protocol):
    """Where a namespace's claim templates and the cluster's DeviceClasses are read from."""

    def claim_reading(self, namespace: str) -> ClaimReading: ...


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def reading_of(source: ClaimSource | None, obj: Mapping[str, Any]) -> ClaimReading | None:
    """``source``'s reading of ``obj``'s namespace (None without a source)."""
    return None if source is None else source.claim_reading(namespace_of(obj))


def charges(pod_spec: Mapping[str, Any], where: str, reading: ClaimReading | None) -> TemplateCharges:
    """What ``pod_spec``'s claims charge per pod under ``reading`` (nothing without one)."""
    if reading is None or not pod_spec.get("resourceClaims"):
        return TemplateCharges()
    return template_charges(pod_spec, where, reading.settings, reading.claim_template)


def backed(
    pod_spec: Mapping[str, Any], requests: Mapping[str, int], where: str, reading: ClaimReading | None
) -> BackedRequests:
    """``requests`` with the extended resources a DeviceClass backs charged to their quota
    resource (queue/dra/extended.py); unchanged without a reading."""
    if reading is None:
        return BackedRequests(requests)
    return backed_requests(pod_spec, requests, where, reading.settings, reading.device_classes)


def quota_requests(pod_spec: Mapping[str, Any], reading: ClaimReading | None) -> dict[str, int]:
    """A pod's requests as the quota counts them (the caps' budget compares these)."""
    return dict(backed(pod_spec, pod_requests(pod_spec), "pod", reading).requests)


def quota_requests_of(source: ClaimSource | None) -> RequestsOf:
    """A live pod's requests as its pod set's were counted. DeviceClasses are cluster-wide, so
    the source's reading of no namespace serves every pod."""
    reading = None if source is None else source.claim_reading("")

    def requests_of(pod_spec: Mapping[str, Any]) -> dict[str, int]:
        return quota_requests(pod_spec, reading)

    return requests_of


def reads_other_objects(pod_specs: Iterable[Mapping[str, Any]], reading: ClaimReading | None) -> bool:
    """Does any of these pod specs name resourceClaims, or ask for an extended resource a
    DeviceClass backs? Its demand then depends on objects beside it (claim templates, device
    classes) and on the reading: it is not memoised by spec alone."""
    specs = [spec for spec in pod_specs if isinstance(spec, Mapping)]
    if any(spec.get("resourceClaims") for spec in specs):
        return True
    if reading is None or reading.device_classes is no_device_classes:
        return False
    return any(
        is_extended_resource_name(name) and reading.device_classes(name)
        for spec in specs
        for name in _requested_names(spec)
    )


def _requested_names(pod_spec: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for field in ("containers", "initContainers"):
        for container in pod_spec.get(field) or []:
            resources = (container.get("resources") if isinstance(container, Mapping) else None) or {}
            for amounts in ("requests", "limits"):
                names.update(resources.get(amounts) or {})
    return names
