"""The DRA settings and ResourceClaimTemplate lookup for the object whose demand is being read.

Kinds build their pod sets from API bodies alone (``podsets.pod_set``); a claim template is
another object. The demand read owns the lookup: every kind's ``pod_sets`` (and the quantity
check) is wrapped by :func:`counting_claims`, which binds, for the object's namespace, the
reading of the process's claim source (:func:`install`: the queue's watch-fed caches). No caller
binds anything. A reading bound explicitly with :func:`reading` (the simulator, tests) wins;
with neither, claims are charged nothing and refuse nothing."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rayquota.operator.queue.dra.claims import ClaimTemplateLookup, TemplateCharges, template_charges
from rayquota.operator.queue.dra.extended import (
    BackedRequests,
    DeviceClassLookup,
    backed_requests,
    is_extended_resource_name,
    no_device_classes,
)
from rayquota.operator.queue.dra.settings import DraSettings
from rayquota.operator.ray.builders.pod_resources import pod_requests


@dataclass(frozen=True)
class ClaimReading:
    settings: DraSettings
    claim_template: ClaimTemplateLookup
    device_classes: DeviceClassLookup = no_device_classes


class ClaimSource(Protocol):
    """Where a namespace's claim templates are read from (the queue's caches)."""

    def claim_reading(self, namespace: str) -> ClaimReading: ...


_CURRENT: ContextVar[ClaimReading | None] = ContextVar("rayquota_dra_reading", default=None)
_SOURCE: list[weakref.ReferenceType[ClaimSource]] = []


def install(source: ClaimSource) -> None:
    """Make ``source`` the process's claim source (held weakly: it lives as long as its owner)."""
    _SOURCE[:] = [weakref.ref(source)]


def _installed() -> ClaimSource | None:
    return _SOURCE[0]() if _SOURCE else None


@contextmanager
def reading(
    settings: DraSettings,
    claim_template: ClaimTemplateLookup,
    device_classes: DeviceClassLookup = no_device_classes,
) -> Iterator[None]:
    token = _CURRENT.set(ClaimReading(settings, claim_template, device_classes))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def namespace_reading(namespace: str) -> Iterator[None]:
    """The installed source's reading of ``namespace``, unless a reading is bound already."""
    source = _installed()
    if _CURRENT.get() is not None or source is None:
        yield
        return
    token = _CURRENT.set(source.claim_reading(namespace))
    try:
        yield
    finally:
        _CURRENT.reset(token)


Read = TypeVar("Read", bound=Callable[..., Any])


def counting_claims(read: Read) -> Read:
    """Wrap a demand read ``read(self, obj, ...)`` so that it counts the claims of ``obj``'s
    namespace."""

    @functools.wraps(read)
    def with_claims(self: Any, obj: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        with namespace_reading(namespace_of(obj)):
            return read(self, obj, *args, **kwargs)

    return with_claims  # type: ignore[return-value]


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def charges(pod_spec: Mapping[str, Any], where: str) -> TemplateCharges:
    """What ``pod_spec``'s claims charge per pod under the bound reading (nothing when unbound)."""
    current = _CURRENT.get()
    if current is None or not pod_spec.get("resourceClaims"):
        return TemplateCharges()
    return template_charges(pod_spec, where, current.settings, current.claim_template)


def backed(pod_spec: Mapping[str, Any], requests: Mapping[str, int], where: str) -> BackedRequests:
    """``requests`` with the extended resources a DeviceClass backs charged to their quota
    resource (queue/dra/extended.py). DeviceClasses are cluster-wide: outside a demand read
    the installed source's are read, so a live pod's requests count as its pod set's did."""
    current = _CURRENT.get()
    if current is None:
        source = _installed()
        current = None if source is None else source.claim_reading("")
    if current is None:
        return BackedRequests(requests)
    return backed_requests(pod_spec, requests, where, current.settings, current.device_classes)


def quota_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """A pod's requests as the quota counts them (the caps' budget compares these)."""
    return dict(backed(pod_spec, pod_requests(pod_spec), "pod").requests)


def reads_other_objects(pod_specs: Iterable[Mapping[str, Any]]) -> bool:
    """Does any of these pod specs name resourceClaims, or ask for an extended resource a
    DeviceClass backs? Its demand then depends on objects beside it (claim templates, device
    classes) and on the reading: it is not memoised by spec alone."""
    specs = [spec for spec in pod_specs if isinstance(spec, Mapping)]
    if any(spec.get("resourceClaims") for spec in specs):
        return True
    current = _CURRENT.get()
    if current is None or current.device_classes is no_device_classes:
        return False
    return any(
        is_extended_resource_name(name) and current.device_classes(name)
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
