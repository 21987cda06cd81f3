"""Extended resources backed by a DeviceClass (Kubernetes' DRAExtendedResource), as quota: pure.

A DeviceClass may name an extended resource (``spec.extendedResourceName``); a container asking
for that resource in its requests or limits (``example.com/gpu: 2``) then gets its devices from
that class through DRA. As Kueue v0.19.2 counts them (``pkg/dra``, its
``KueueDRAIntegrationExtendedResource``): the pod's request for the name (containers summed, init
containers at their peak) is charged to the quota resource the backing class is mapped to by
``resources.deviceClassMappings``, or to the extended resource's own name when the class is not
mapped. Where several classes name one extended resource, the one the scheduler allocates from
counts: the one created last, and of those created together the first by name. A fractional
amount of a backed resource is refused, naming the container's field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.operator.queue.dra.claims import MILLI
from rayquota.operator.queue.dra.settings import DraSettings
from rayquota.operator.ray.builders.pod_resources import container_requests

DeviceClassLookup = Callable[[str], Sequence[Mapping[str, Any]]]
"""The DeviceClasses (API bodies) whose ``spec.extendedResourceName`` is the given name."""

INT64_MAX = 2**63 - 1


def no_device_classes(name: str) -> Sequence[Mapping[str, Any]]:
    return ()


def is_extended_resource_name(name: str) -> bool:
    """Not a native resource (a name with a domain outside ``kubernetes.io``), as Kubernetes
    tells them apart; ``requests.`` names are quota names, not resources."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def selected_device_class(classes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The class the scheduler allocates from among ``classes`` (non-empty): the one created
    last; of those created in the same second, the first by name."""

    def created(body: Mapping[str, Any]) -> str:
        return str((body.get("metadata") or {}).get("creationTimestamp") or "")

    latest = max(created(c) for c in classes)
    return min((c for c in classes if created(c) == latest), key=lambda c: str(c["metadata"]["name"]))


@dataclass(frozen=True)
class BackedRequests:
    """A pod's requests with its DeviceClass-backed extended resources charged to their quota
    resource; ``classes``: extended resource -> the DeviceClass it was charged through."""

    requests: Mapping[str, int]
    errors: tuple[str, ...] = ()
    classes: Mapping[str, str] | None = None


def backed_requests(
    pod_spec: Mapping[str, Any],
    requests: Mapping[str, int],
    where: str,
    settings: DraSettings,
    device_classes: DeviceClassLookup,
) -> BackedRequests:
    """``requests`` (the pod's, milli-units) as the quota counts them (``where``: the template's
    field, for the errors)."""
    if not settings.integration:
        return BackedRequests(requests)
    quota_key: dict[str, str] = {}
    classes: dict[str, str] = {}
    errors: list[str] = []
    for name, amount in requests.items():
        if amount <= 0 or not is_extended_resource_name(name):
            continue
        backing = device_classes(name)
        if not backing:
            continue
        device_class = str(selected_device_class(backing)["metadata"]["name"])
        fractional = _fractional(pod_spec, name, where, device_class)
        if amount // MILLI > INT64_MAX:
            fractional.append(f"{where}.spec: {name}: the pod's total overflows a 64-bit integer")
        if fractional:
            errors += fractional
            continue
        quota_key[name] = settings.lookup(device_class) or name
        classes[name] = device_class
    if not quota_key:
        return BackedRequests(requests, tuple(errors))
    out = {name: amount for name, amount in requests.items() if name not in quota_key}
    for name, key in quota_key.items():
        out[key] = out.get(key, 0) + requests[name]
    return BackedRequests(out, tuple(errors), classes)


def _fractional(pod_spec: Mapping[str, Any], name: str, where: str, device_class: str) -> list[str]:
    """Each container asking for a fraction of ``name`` (checked per container: two halves must
    not hide each other in a whole sum)."""
    errors = []
    for field in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(field) or []):
            amount = container_requests(container).get(name, 0)
            if amount % MILLI:
                resources = container.get("resources") or {}
                kind = "requests" if name in (resources.get("requests") or {}) else "limits"
                value = (resources.get(kind) or {}).get(name)
                errors.append(
                    f"{where}.spec.{field}[{index}].resources.{kind}.{name}: {value!r}: backed by "
                    f"DeviceClass {device_class!r}, so it must be a whole number of devices"
                )
    return errors
